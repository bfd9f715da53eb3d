"""MiniGrid environments: short names, observation encoding, transfer pairs."""
