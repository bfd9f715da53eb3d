"""The POPGym suite: every cell in our PPO and sb3-contrib's RecurrentPPO on POPGym's Easy envs,
scored by POPGym's own measure, the maximum mean episodic reward (:mod:`.mmer`)."""
