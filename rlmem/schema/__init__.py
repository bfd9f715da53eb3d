"""Typed Hydra schemas, registered in Hydra's ConfigStore before a CLI composes its config."""
