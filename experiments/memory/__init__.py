"""MiniGrid's memory task: every cell on MemoryS7, zero-shot on MemoryS13 (``suite``,
``aggregate``), and the analyses of where the agents start and what they remember
(``start_positions``, ``fork_probe``)."""
