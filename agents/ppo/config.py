"""The config of our PPO (``agent=ppo``): torch-free; its defaults are written only here and in
its presets (:mod:`rlmem.agents.ppo.presets`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rlmem.agents.base import EnvProbe
from rlmem.agents.ppo.hyperparameters import PPOHyperparameters
from rlmem.agents.ppo.presets import PRESETS, Preset, decide_presets

if TYPE_CHECKING:
    from rlmem.agents.run_config import RunConfig


@dataclass
class PPOConfig(PPOHyperparameters):
    """Hyperparameters of our PPO (``agent=ppo``): the shared ones, the BPTT chunk, the critic's
    memory, the reward scale and the entropy bonus.

    The keys from ``normalize_advantage`` to ``entropy_coef``, and ``frames_per_env``,
    ``epochs`` and ``batch_size``, default to null: the run's preset (``preset``, chosen from
    the env's family unless set) decides each one when the config is built, and the run
    records the values (:func:`rlmem.agents.ppo.presets.decide_presets`). A value given on the
    command line wins over the preset's. The presets minigrid and generic:

    - ``normalize_advantage``: minigrid false, generic true;
    - ``shared_memory``: minigrid true, generic false;
    - ``recurrence``: minigrid 16, generic 64;
    - ``reward_scale``: 1 for both;
    - ``entropy_coef``: minigrid 0.01, generic 0;
    - ``frames_per_env``, ``epochs``, ``batch_size``: 128, 4, 256 for both;
    - and, where ``memory.hidden_size`` is null (``rlmem.train``'s default), the memory's size:
      minigrid 64, generic 256; where ``num_envs`` is null, 16 envs for both.

    The fast preset (``agent.preset=fast``, never chosen by an env's family) keeps minigrid's
    learning values, memory and gradient steps per frame (4 epochs of minibatches of 256
    frames), and acts in 256 envs with rollouts of 16 frames per env (one BPTT chunk), chosen
    by wall-clock time to a return of 0.9 on tuning seeds 0-2 of DoorKey-5x5 and MemoryS7
    (``experiments/fast_trainer/TUNING.md``): it was the only candidate of five that learnt
    MemoryS7 on every tuning seed (286k-393k frames); those with fewer gradient steps per frame
    (XLand-MiniGrid's and purejaxrl's recipes: 1-2 epochs of large minibatches) ran 1.7-4x
    as many frames a second but learnt no memory within 800k frames on tuning seed 0. On this
    CPU its update costs what minigrid's does per frame, so it saves only the acting: about
    2.6k frames/s against minigrid's 1.4-1.7k on the tensor envs, one thread. It is meant for
    the tensor envs (``env_backend=tensor``), where 256 envs step as one batch.

    minigrid is rl-starter-files' recipe, unchanged (MiniGrid runs are what they were). generic
    was measured on POPGym 1.0.7's RepeatPreviousEasy with an LSTM of 64 (80k frames, seeds
    100-102, the greedy policy's mean return over 100 episodes; a memoryless policy scores
    about -0.5, a perfect one 1), one change at a time: minigrid's values 0.07 / 0.15 / 0.18;
    with normalised advantages 0.17 / 0.18 / 0.20; and a critic memory of its own 0.24 / 0.23
    / 0.28; and 64-step BPTT 0.33 / 0.30 / 0.32 (sb3-contrib's RecurrentPPO with the same
    LSTM, rollout, batch, epochs and learning rate: 0.46, seed 100). The memory of 256 is
    sb3-contrib's LSTM's: at the POPGym suite's 163,840 frames, against these values with a
    memory of 64, it raised lstm's MMER on RepeatPreviousEasy from 0.94 / 0.82 to 0.99 / 0.98
    (tuning seeds 100 / 101; ``python -m experiments.popgym.tune``, whose ``TUNING.md`` also
    has the changes not taken: no entropy bonus, 128-step BPTT, no value clip). It costs about
    2.3 times as much per frame as 64. Then, with the memory of 256, no entropy bonus raised
    the MMER on both tuning envs and both seeds (``entropy_coef``). The values of the other
    keys are the shared defaults (:class:`~rlmem.agents.ppo.hyperparameters.PPOHyperparameters`).
    """

    name: str = "ppo"
    """Trainer name (``agent=ppo``)."""
    preset: Preset | None = None
    """Whose values the keys below take where they are null: minigrid (rl-starter-files'
    MiniGrid recipe, rlmem's defaults before presets), generic (measured on POPGym's Easy
    envs against sb3-contrib's RecurrentPPO, issue 30) or fast (minigrid's learning values in
    many envs, short rollouts and large minibatches, issue 59; see the list above). null:
    minigrid for MiniGrid and BabyAI envs, generic for every other env
    (:func:`rlmem.envs.family.env_family`). The run records the preset it took."""
    normalize_advantage: bool | None = None
    """Standardise advantages within each minibatch. null: the preset's. minigrid: false, as
    rl-starter-files (MiniGrid's one reward of up to 1 gives advantages of order 0.1-1, which
    weigh enough against the 0.01 entropy bonus). generic: true, as sb3-contrib: where rewards
    are small (POPGym pays ±1/48 a step, so advantages are ~0.05) the entropy bonus otherwise
    outweighs the policy gradient and keeps the policy near uniform (measured: +0.05 on
    RepeatPreviousEasy)."""
    shared_memory: bool | None = None
    """The actor and the critic read one memory cell (rl-starter-files); false gives the critic
    a cell of its own, of the same config, reading the same encoded observation (sb3-contrib's
    enable_critic_lstm), so the value loss never shapes the actor's memory, nor the policy
    loss the critic's. null: the preset's. minigrid: true, rl-starter-files' model. generic:
    false, as sb3-contrib: with normalised advantages the policy's gradient is of order 1
    while the value loss of POPGym's small returns is of order 0.01, and a shared cell is
    shaped by both (measured: +0.07 on RepeatPreviousEasy). It doubles the memory's cost."""
    recurrence: int | None = None
    """Steps of backpropagation through time: the chunk length (``batch_size / recurrence``
    chunks per minibatch; ``frames_per_env`` and ``batch_size`` must be multiples of it).
    null: the preset's. minigrid: 16, rl-starter-files' value. generic: 64, half of the
    128-step rollout (sb3-contrib backpropagates through whole rollout sequences): POPGym's
    episodes are tens of steps long, and chunks of 16 cut most of them into pieces the
    gradient cannot cross (measured: +0.07 on RepeatPreviousEasy); 4 chunks per minibatch of
    256 frames."""
    reward_scale: float | None = None
    """Factor on the rewards the update learns from (advantages, returns, values); the logged
    returns stay the env's. null: the preset's, 1 for both: with normalised advantages the
    policy's gradient does not depend on the rewards' scale, and the value clip
    (``clip_value``, ±``clip`` in the returns' units) would hold back values of larger returns.
    Set it for rewards far from order 1 (e.g. returns in the hundreds, which value_coef and
    the value clip were not made for); not measured on POPGym."""
    entropy_coef: float | None = None
    """Weight of the entropy bonus (:math:`c_2` of :mod:`rlmem.agents.ppo.loss`). null: the
    preset's. minigrid: 0.01, rl-starter-files' value. generic: 0, as sb3-contrib's
    RecurrentPPO. Measured on POPGym's suite budget (163,840 frames, lstm with the generic
    preset's other values, tuning seeds 100 / 101, ``experiments/popgym/TUNING.md``): without
    the bonus the MMER rose on RepeatPreviousEasy from 0.993 / 0.983 to 0.997 / 0.991 and on
    CountRecallEasy from -0.514 / -0.531 to -0.510 / -0.522: a bonus keeps a near-solved
    policy sampling wrong actions, and the MMER is a mean over sampled episodes. With a memory
    of 64, which learnt more slowly, no bonus had done worse; this round was run after the
    suite's first seeds showed RecurrentPPO ahead on RepeatPreviousEasy."""

    update_threads: int | None = None
    """Threads that compute each minibatch's gradient on the CPU, each on a part of its chunks
    (:mod:`rlmem.agents.ppo.gradient_parts`): the same gradient, summed in another order, so
    a second core shortens the update where the parts are large enough to outweigh the
    threads' hand-overs (``docs/performance.md#update-threads``). null: decided when the run
    starts, and recorded: 1 where ``vectorization`` is set (``sync`` is the bit-exact
    reference), where the device is ``cuda`` (a GPU's kernels queue on one stream, so parts
    gain nothing there) or where a minibatch has fewer than
    :data:`MIN_FRAMES_PER_THREAD` frames per thread; else the usable cores, at most
    :data:`MAX_UPDATE_THREADS`: so minibatches of 512 frames or more take 2 threads on a
    machine of 2 cores or more, the presets' minibatches of 256 take 1. A resumed run
    keeps its recorded value (1 for runs from before this key). On a CUDA device
    (``device=auto`` on a GPU machine included) the update runs in one thread whatever this
    says. Running several runs side by side on a machine, give each 1."""

    fused_adam: bool | None = None
    """Whether Adam updates each weight in one fused kernel (torch's ``fused=True``) instead of
    a sequence of ``foreach`` operations over all of them: the same update in another order of
    roundings (equal in float64: ``tests/agents/test_fused_adam.py``), its optimizer step
    about 5x faster on the CPU, the fast preset's frames/s 4-7 % higher
    (``docs/performance.md#fused-adam``). null: decided when the run starts, and recorded:
    off where ``vectorization`` is set (``sync`` is the bit-exact reference) or the device is
    ``cuda``, and for resumed runs that recorded none or off (whose arithmetic they continue);
    else on, for every cell. Once the kernel's writes were found not to reach the weights the
    attentive cells derive for acting (relstm learnt DoorKey-5x5 in 0 of 9 runs,
    ``experiments/fast_trainer/FUSED_ADAM.md``), those weights follow every optimizer step
    (``rlmem.cells._engines.weight_cache``); its first learning check (relstm, seeds 3-7,
    ``FUSED_ADAM_LEARNING.md``) then failed its rule on one of six intervals (MemoryS7's
    evaluated return), a rule measured to fail about one time in four where nothing differs;
    on fifteen seeds, by the rule of ``experiments/fast_trainer/fused_adam_more_seeds.py``
    written before its ten new seeds ran, relstm learnt as with the ``foreach`` steps (the
    lowest upper bound of the six P intervals 0.54, paired permutation p = 0.160:
    ``FUSED_ADAM_MORE_SEEDS.md`` there)."""

    folded_grid: bool | None = None
    """Whether the grid encoder computes its embedding, first convolution, ReLU and max-pool as
    one table lookup on the CPU, and its last convolution as one matrix product
    (:mod:`rlmem.agents.grid_fold`): the same function (equal in float64:
    ``tests/agents/test_grid_fold.py``) rounded in another order; whole updates 1.1-1.4× as
    fast, the fast preset's most (``docs/performance.md#folded-grid``). MiniGrid's
    ``embedding`` grid encoding only; on a GPU, or without the compiled loops, the modules run
    as without it, whatever this says (``device=auto`` on a GPU machine included). null:
    decided when the run starts, and recorded: off where ``vectorization`` is set (``sync`` is
    the bit-exact reference), where the grid encoding is not ``embedding`` or the device is
    ``cuda``, and for resumed runs that recorded none (whose arithmetic they continue); else
    on: lstm at the fast preset learnt as with the modules on the test seeds, every
    P(folded ≥ modules) interval containing ½ (``experiments/fast_trainer/FOLDED_GRID.md``, by
    the rule of ``experiments/fast_trainer/folded_grid.py`` written before its runs)."""

    compiled_lstm: bool | None = None
    """Whether an ``lstm`` memory runs each chunk that an episode's reset cuts in one call of the
    compiled loops, the resets inside it (:mod:`rlmem.cells._engines.lstm_chunk`), instead of
    torch's fused kernel once per reset-free segment: the same function (equal in float64:
    ``tests/cells/test_lstm_chunk.py``) rounded otherwise. Late in a run, when episodes are
    shorter than the fast preset's chunks of 16 steps, a minibatch's chunks are cut about nine
    times and whole updates ran 1.5-1.6× as fast (``docs/performance.md#compiled-lstm``); a
    chunk that no reset cuts takes torch's kernel, the faster there, but on a CPU with AVX-512
    a minibatch's small one, which runs compiled with the blocked products (whole updates
    1.07-1.11×; ``experiments/fast_trainer/BLOCKED_LSTM.md`` its learning check). CPU only;
    the other cells' engines take the resets inside already (a run of another memory that asks
    for it is refused before it starts). null: decided when the run starts, and recorded: off for
    another memory, where ``vectorization`` is set (``sync`` is the bit-exact reference) or
    the device is ``cuda``, and for resumed runs that recorded none or off (whose arithmetic
    they continue); else on. Its first check (seeds 3-7,
    ``experiments/fast_trainer/COMPILED_LSTM.md``) failed its rule on one of six intervals, a
    rule measured afterwards to fail about one time in four where nothing differs; on fifteen
    seeds, by the rule of ``experiments/fast_trainer/compiled_lstm_more_seeds.py`` written
    before its ten new seeds ran, lstm learnt as with torch's kernel (the lowest upper bound
    of the six P intervals 0.58, paired permutation p = 0.389: ``COMPILED_LSTM_MORE_SEEDS.md``
    there)."""

    blocked_products: bool | None = None
    """Whether the model's own float32 products (the actor's and critic's hidden layers, the
    folded grid encoder's last two convolutions; not the memory cell's, nor the heads' narrow
    outputs) take the compiled loops' blocked product on a CPU with AVX-512
    (:mod:`rlmem.agents.blocked_linear`), in place of torch's (MKL's, whose AVX2 code and
    per-call set-up cost more at a minibatch's 256 × 128 → 64: 0.69 of its time forward and
    backward, whole updates 0.94): the same products rounded otherwise (within float32 rounding
    of ``functional.linear``: ``tests/agents/test_blocked_linear.py``). Elsewhere (a CPU
    without AVX-512, a GPU, float64, without the compiled loops) torch's products run whatever
    this says. null: decided when the run starts, and recorded: off where ``vectorization`` is
    set (``sync`` is the bit-exact reference) or the device is ``cuda``, and for resumed runs
    that recorded none or off (whose arithmetic they continue); else on: lstm at the fast
    preset learnt as with torch's products on the test seeds, every P(blocked ≥ torch's)
    interval containing ½ (``experiments/fast_trainer/BLOCKED_PRODUCTS.md``, by the rule of
    ``experiments/fast_trainer/blocked_products.py`` written before its runs)."""

    memory_products: bool | None = None
    """Whether the memory cell's float32 products on the CPU leave torch's (MKL's) as inside
    :func:`rlmem.cells.onednn_products` (the supervised trainer's): a cell's large products in
    oneDNN, the small ones of its compiled time loops (a PPO minibatch's 16 items a step) and
    their weight gradients in the blocked AVX-512 loop, where MKL's AVX2 code and per-call
    set-up cost several times their arithmetic on an AMD CPU (relstm's update at the fast
    preset spent about a fifth of its time in MKL's small products). The same function rounded
    otherwise (``tests/cells/test_onednn_linear.py``). It changes nothing for ``lstm`` and
    ``gru``, whose chunks take the blocked loop already (``agent.compiled_lstm``; the GRU's
    compiled chunk). Whole fast-preset updates (``benchmarks/blocked_products.py --key
    memory_products``): relstm 1.04× the frames/s, memlstm 1.06×, tarnn 1.10×, sarnn 1.03×,
    deltanet 1.01×. null: decided when the run starts, and recorded: off where
    ``vectorization`` is set (``sync`` is the bit-exact reference) or the device is ``cuda``,
    and for resumed runs that recorded none or off (whose arithmetic they continue); else on:
    relstm at the fast preset learnt as with torch's products on the test seeds, every
    P(memory products ≥ torch's) interval containing ½
    (``experiments/fast_trainer/MEMORY_PRODUCTS.md``, by the rule of
    ``experiments/fast_trainer/memory_products.py`` written before its runs)."""

    processes: int = 1
    """Processes that train the run together, each a replica of the learner with
    ``num_envs / processes`` of the envs and ``batch_size / processes`` frames of every
    minibatch, their gradients averaged before each step (:mod:`rlmem.agents.ppo.replicas`): the
    same minibatches' gradient, rounded otherwise, with the envs' and the minibatches' draws
    made apart in each process, so a run of 2 is not the run of 1 step for step. The second
    core then acts and computes gradients too, where ``update_threads`` split only each
    minibatch's gradient: on this project's 2-core machine, two processes at the fast preset
    ran 1.29-1.34x the frames/s of one (``docs/performance.md#processes``). It needs the tensor
    envs (``env_backend=tensor``) on the CPU, and ``num_envs`` and ``batch_size`` divisible by
    it (and ``batch_size / processes`` by ``recurrence``). Give it at most the machine's free
    cores: the replicas wait for each other at every minibatch, so one slowed by another
    program slows them all."""

    supports_stop_return: ClassVar[bool] = True

    def __post_init__(self) -> None:
        """Raise a :class:`ValueError` naming the key when a value is out of range. A
        ``recurrence`` left null is checked once decided (the run's config checks its decided
        agent, :func:`rlmem.schema.train.resolve`); here, a batch that no preset
        it may take can cut into chunks fails already."""
        super().__post_init__()
        if self.recurrence is not None and self.recurrence <= 0:
            raise ValueError(f"agent.recurrence must be positive, got {self.recurrence}")
        if self.reward_scale is not None and not self.reward_scale > 0:
            raise ValueError(f"agent.reward_scale must be positive, got {self.reward_scale}")
        if self.processes < 1:
            raise ValueError(f"agent.processes must be at least 1, got {self.processes}")
        if self.update_threads is not None and self.update_threads < 1:
            raise ValueError(f"agent.update_threads must be at least 1, got "
                             f"{self.update_threads}; null lets the run decide")
        if self.entropy_coef is not None and self.entropy_coef < 0:
            raise ValueError(f"agent.entropy_coef must be non-negative, got {self.entropy_coef}")
        candidates = ([(self.recurrence, "")] if self.recurrence is not None else
                      [(PRESETS[preset].recurrence, f" (the {preset.name} preset's)")
                       for preset in (list(Preset) if self.preset is None else [self.preset])])
        for key in ("frames_per_env", "batch_size"):
            value = getattr(self, key)
            if value is None:
                continue  # checked once the preset decided it
            failing = [(recurrence, whose) for recurrence, whose in candidates
                       if value % recurrence]
            if len(failing) == len(candidates):
                recurrence, whose = failing[0]
                raise ValueError(f"agent.{key}={value} must be a multiple of "
                                 f"agent.recurrence={recurrence}{whose}")

    @property
    def chunk_length(self) -> int:
        """``recurrence`` as the run decided it (a run trains its decided config,
        :func:`rlmem.agents.derived.agent_config`).

        Raises:
            ValueError: ``recurrence`` is still null (the config was not decided).
        """
        return int(decided_value(self, "recurrence"))

    @classmethod
    def decided(cls, agent: Mapping[str, Any], config: Mapping[str, Any],
                recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The preset and the keys it decides (:func:`~rlmem.agents.ppo.presets.decide_presets`
        for the run's env), ``update_threads`` (:func:`decided_update_threads`),
        ``folded_grid`` (:func:`decided_folded_grid`), ``compiled_lstm``
        (:func:`decided_compiled_lstm`), ``fused_adam`` (:func:`decided_outside_reference`,
        for every cell), ``blocked_products`` and ``memory_products`` (the same)."""
        decided = decide_presets(agent, config["env"], recorded)
        decided["update_threads"] = decided_update_threads(decided, config, recorded)
        decided["fused_adam"] = decided_outside_reference("fused_adam", decided, config,
                                                          recorded, applies=True)
        decided["folded_grid"] = decided_folded_grid(decided, config, recorded)
        decided["compiled_lstm"] = decided_compiled_lstm(decided, config, recorded)
        decided["blocked_products"] = decided_outside_reference(
            "blocked_products", decided, config, recorded, applies=True)
        decided["memory_products"] = decided_outside_reference(
            "memory_products", decided, config, recorded, applies=True)
        return decided

    @classmethod
    def memory_size(cls, agent: Mapping[str, Any]) -> int | None:
        """The decided preset's memory size: minigrid 64, generic 256, fast 64 (see the class
        docstring)."""
        return PRESETS[Preset[str(agent["preset"])]].memory_size

    @classmethod
    def decided_num_envs(cls, agent: Mapping[str, Any]) -> int | None:
        """The decided preset's envs: minigrid and generic 16, fast 256 (see the class
        docstring)."""
        return PRESETS[Preset[str(agent["preset"])]].num_envs

    def check_run(self, config: RunConfig[Any], env: EnvProbe) -> None:
        """The model must encode every observation field and have a head for the actions, a
        minibatch must fit in the rollout, and the rollout must fit the run's device
        (:func:`~rlmem.agents.ppo.rollout_footprint.check_rollout_fits`), with one step's
        tensors beside it where the rollout is large
        (:func:`~rlmem.agents.ppo.step_footprint.check_step_fits`)."""
        # torch only when a run is checked
        from rlmem.agents.ppo.model import check_spaces
        from rlmem.agents.ppo.rollout_footprint import check_rollout_fits
        from rlmem.agents.ppo.step_footprint import check_step_fits
        from rlmem.runs.device import resolve_device

        try:
            check_spaces(env.observation_space, env.action_space, config.grid_encoding,
                         config.discrete_encoding)
        except ValueError as error:
            raise ValueError(f"env={env.name}: {error}") from None
        if self.folded_grid and config.grid_encoding != "embedding":
            raise ValueError(f"agent.folded_grid=true folds the grid's embedding into its first "
                             f"convolution, and grid_encoding={config.grid_encoding} has no "
                             f"embedding: use grid_encoding=embedding, or agent.folded_grid=false")
        if self.compiled_lstm and config.memory["name"] != "lstm":
            raise ValueError(f"agent.compiled_lstm=true runs an lstm memory's chunks in the "
                             f"compiled loop, and memory={config.memory['name']} is not lstm: "
                             f"use memory=lstm, or leave agent.compiled_lstm unset")
        frames_per_env = int(decided_value(self, "frames_per_env"))
        rollout, batch = config.num_envs * frames_per_env, int(decided_value(self, "batch_size"))
        if batch > rollout:  # minibatches() would quietly take the whole rollout as one
            raise ValueError(
                f"agent.batch_size={batch} is more than the rollout's {rollout} frames "
                f"(num_envs={config.num_envs} × agent.frames_per_env={frames_per_env}): every "
                f"epoch would be one minibatch of {rollout} frames. Choose agent.batch_size "
                f"≤ {rollout}, or more num_envs or a longer agent.frames_per_env.")
        device = resolve_device(str(config.device))
        check_rollout_fits(env.observation_space, config.num_envs, frames_per_env, device)
        check_step_fits(config, env.observation_space, frames_per_env, device)
        if self.processes > 1:
            self._check_processes(config, batch)

    def _check_processes(self, config: RunConfig[Any], batch: int) -> None:
        """A data-parallel run's envs and minibatches must split evenly between its processes,
        on the CPU's tensor envs (see :attr:`processes`)."""
        from rlmem.envs.backend import TENSOR
        from rlmem.runs.device import resolve_device

        processes = f"agent.processes={self.processes}"
        if config.env_backend != TENSOR:
            raise ValueError(f"{processes} needs the tensor envs: each process steps its share "
                             f"of them as one batch; env_backend={config.env_backend} steps "
                             f"{config.env}'s envs one by one. Use env_backend=tensor, or "
                             "agent.processes=1.")
        device = resolve_device(str(config.device))
        if device.type != "cpu":
            raise ValueError(f"{processes} runs on the CPU, a core each; device={config.device} "
                             f"is {device} here, a GPU whose one stream the processes would "
                             "share. Use device=cpu, or agent.processes=1.")
        recurrence = self.chunk_length
        for key, value, multiple in (("num_envs", config.num_envs, self.processes),
                                     ("agent.batch_size", batch, self.processes * recurrence)):
            if value % multiple:
                raise ValueError(
                    f"{key}={value} does not split between {processes}"
                    + (f" in whole chunks of agent.recurrence={recurrence} frames"
                       if key == "agent.batch_size" else "")
                    + f": choose a multiple of {multiple}, or another agent.processes.")


MAX_UPDATE_THREADS = 2
"""The most threads a null ``update_threads`` takes: measured on 2 cores only."""

MIN_FRAMES_PER_THREAD = 256
"""The fewest frames of a minibatch per thread for a null ``update_threads`` to take more than
one. Measured on this project's 2-core machine, whole updates (rollout and PPO update) taking
turns in one process (``python benchmarks/update_threads.py``,
``benchmarks/results/update_threads.md``): with two threads the fast preset's minibatches of
512 frames ran at 1.00-1.27x the frames/s of one thread (lstm 1.14-1.27x, relstm 1.00-1.16x),
the minigrid preset's 256 at 0.95-1.01x, where each part's many small kernels cost about what
the second core gains."""


def decided_update_threads(agent: Mapping[str, Any], config: Mapping[str, Any],
                           recorded: Mapping[str, Any] | None = None) -> int:
    """``agent.update_threads`` as the run takes it (see :attr:`PPOConfig.update_threads`):
    a value given is kept; a resumed run keeps its recorded one (1 where it recorded none);
    else 1 with ``vectorization`` set, ``device=cuda`` or minibatches of fewer than
    :data:`MIN_FRAMES_PER_THREAD` frames a thread, and the usable cores, at most
    :data:`MAX_UPDATE_THREADS`, otherwise. ``agent`` has its preset's ``batch_size``
    decided."""
    # Here, not at the top: rlmem.envs imports torch, which composing a config must not.
    from rlmem.envs.vectorization import usable_cores

    if agent.get("update_threads") is not None:
        return int(agent["update_threads"])
    if recorded is not None:
        return int(recorded.get("update_threads") or 1)
    if keeps_reference_kernels(config):
        return 1
    threads = min(MAX_UPDATE_THREADS, usable_cores(),
                  int(agent["batch_size"]) // MIN_FRAMES_PER_THREAD)
    return max(1, threads)


def decided_folded_grid(agent: Mapping[str, Any], config: Mapping[str, Any],
                        recorded: Mapping[str, Any] | None = None) -> bool:
    """``agent.folded_grid`` as the run takes it (see :attr:`PPOConfig.folded_grid`):
    :func:`decided_outside_reference`, off for another grid encoding (nothing to fold)."""
    return decided_outside_reference(
        "folded_grid", agent, config, recorded,
        applies=config.get("grid_encoding", "embedding") == "embedding")


def decided_compiled_lstm(agent: Mapping[str, Any], config: Mapping[str, Any],
                          recorded: Mapping[str, Any] | None = None) -> bool:
    """``agent.compiled_lstm`` as the run takes it (see :attr:`PPOConfig.compiled_lstm`):
    :func:`decided_outside_reference`, off for a memory other than ``lstm``."""
    memory = config.get("memory")
    return decided_outside_reference(
        "compiled_lstm", agent, config, recorded,
        applies=isinstance(memory, Mapping) and memory.get("name") == "lstm")


def decided_outside_reference(key: str, agent: Mapping[str, Any], config: Mapping[str, Any],
                              recorded: Mapping[str, Any] | None, *, applies: bool) -> bool:
    """``agent.<key>``, a CPU kernel whose learning check passed, as the run takes it: a value
    given is kept; off where it does not ``applies`` to the run; a resumed run keeps its
    recorded one (off where it recorded none); else off for the exact reference or a CUDA
    device (:func:`keeps_reference_kernels`), and on otherwise."""
    if agent.get(key) is not None:
        return bool(agent[key])
    if not applies:
        return False
    if recorded is not None:
        return bool(recorded.get(key) or False)
    return not keeps_reference_kernels(config)


def keeps_reference_kernels(config: Mapping[str, Any]) -> bool:
    """Whether a CPU kernel choice left null keeps the reference's arithmetic: the run is the
    :func:`exact_reference`, or its device is ``cuda`` (where the CPU's kernels do not run)."""
    return exact_reference(config) or str(config.get("device", "auto")).startswith("cuda")


def exact_reference(config: Mapping[str, Any]) -> bool:
    """Whether the run is the trainer's bit-exact reference: ``vectorization`` is set
    (``sync``: ``tests/agents/test_ppo_sync_fixture.py``), so every choice that changes only
    the rounding keeps the reference's."""
    # Here, not at the top: rlmem.envs imports torch, which composing a config must not.
    from rlmem.envs.vectorization import AUTO

    return bool(config.get("vectorization", AUTO) != AUTO)


def decided_value(agent: PPOConfig, key: str) -> Any:
    """The value of ``key``, one the preset decides, as the run decided it (a run trains its
    decided config, :func:`rlmem.agents.derived.agent_config`). ``agent`` may be the
    dataclass or its structured ``DictConfig``.

    Raises:
        ValueError: the key is still null (the config was not decided).
    """
    value = getattr(agent, key)
    if value is None:
        raise ValueError(f"agent.{key} is null: decide the config's presets first "
                         "(rlmem.schema.train.resolve)")
    return value
