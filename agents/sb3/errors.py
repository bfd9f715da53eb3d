"""The error :class:`~rlmem.agents.sb3.MemoryPolicy` raises for arguments sb3-contrib rejects
with ``assert``."""

from __future__ import annotations


class PolicyArgumentError(ValueError, AssertionError):
    """An invalid combination of the policy's arguments (``shared_lstm=True`` with
    ``enable_critic_lstm=True``, or with an unshared features extractor).

    Both a :class:`ValueError`, what rlmem raises for a bad value (and what ``python -O``
    keeps, where an ``assert`` disappears), and an :class:`AssertionError`, what sb3-contrib's
    ``RecurrentActorCriticPolicy`` raises there: so :class:`~rlmem.agents.sb3.MemoryPolicy` is
    a drop-in for sb3-contrib's policies, whose own ``test_check`` expects
    ``pytest.raises(AssertionError)``, and code catching either error keeps working.
    """
