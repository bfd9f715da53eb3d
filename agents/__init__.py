"""Agents: the actor-critic model, our recurrent PPO, and the sb3-contrib adapter."""
