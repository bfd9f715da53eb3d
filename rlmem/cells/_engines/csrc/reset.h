// The episode-reset rule of the compiled loops, the twin of rlmem/cells/resets.py (where the
// rule is written out): a batch item that starts a new episode at a step has its state set to
// what an episode starts from before the step (fill: zero for a state, or an empty slot's mask),
// and, going back, no gradient crosses into the episode before. masked_fill rather than a
// multiplication by a mask, so that a non-finite value of a finished episode cannot leak on.
// where: bool, broadcastable to value; in_place: fill value itself (a scratch buffer) rather
// than a copy (a view of an output).

inline Tensor reset_where(const Tensor& value, const Tensor& where, double fill = 0.0,
                          bool in_place = false) {
  if (in_place) {
    return value.masked_fill_(where, fill);
  }
  return value.masked_fill(where, fill);
}
