"""What the suites share: resumable sweeps (:mod:`.sweep`), runs that other processes may hold
(:mod:`.suite_runs`) and how an rlmem process ended, as a suite counts it (:mod:`.outcome`)."""
