// MiniGrid's step and egocentric view for a batch of worlds on the CPU: the core of
// rlmem.envs.tensor.minigrid.env.MiniGridTensorEnv._transition (between a family's _actions and
// _outcome) and rlmem.envs.tensor.minigrid.view.egocentric_image, one pass over the envs each.
// Not a cell's loop: at 16 envs the tensor env's step was hundreds of small ATen calls, each
// costing more to call than to run (the same reason as grid_fold.h).
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers; not a standalone header.
//
// Cells are MiniGrid's (object, colour, state) bytes and a zero byte, read as one int32
// (little-endian: object in the low byte), as rlmem.envs.tensor.minigrid.objects stores them.
// MiniGrid's indices (objects, states, actions) are not written here: the caller passes them,
// in the order of MiniGridCodes, from the Python module that names them.

struct MiniGridCodes {
  int32_t empty, wall, floor, door, key, ball, box, goal, lava;  // OBJECT_TO_IDX
  int32_t open, closed, locked;                                  // STATE_TO_IDX
  int64_t forward, pickup, drop, toggle;                         // Actions
  int32_t nothing, wall_cell;  // packed (EMPTY, 0, 0) and (WALL, GREY, 0)

  explicit MiniGridCodes(const Tensor& codes) {
    TORCH_CHECK(codes.scalar_type() == at::kLong && codes.numel() == 18,
                "minigrid codes: 18 int64 expected");
    const Tensor values = codes.contiguous();
    const int64_t* c = values.data_ptr<int64_t>();
    empty = c[0], wall = c[1], floor = c[2], door = c[3], key = c[4], ball = c[5];
    box = c[6], goal = c[7], lava = c[8], open = c[9], closed = c[10], locked = c[11];
    forward = c[12], pickup = c[13], drop = c[14], toggle = c[15];
    nothing = c[16], wall_cell = c[17];
  }

  // WorldObj.can_overlap, see_behind and can_pickup of a packed cell, written as
  // objects.py's can_overlap, see_behind and can_pickup are.
  bool can_overlap(int32_t cell) const {
    const int32_t kind = cell & 0xFF;
    return kind == empty || kind == floor || kind == goal || kind == lava ||
           (kind == door && (cell >> 16) == open);
  }
  bool see_behind(int32_t cell) const {
    const int32_t kind = cell & 0xFF, state = (cell >> 16) & 0xFF;
    return !(kind == wall || (kind == door && state != open));
  }
  bool can_pickup(int32_t cell) const {
    const int32_t kind = cell & 0xFF;
    return kind == key || kind == ball || kind == box;
  }
};

// One MiniGridEnv.step for every env: grid (N, W, H, 4) uint8 and carrying (N, 4) uint8 are
// changed in place (as the Python step changes them); the new step_count, agent_dir and
// agent_pos are returned, with whether each env stepped onto a goal and onto lava. action (N,)
// int64, as the family's _actions gives it; dir_to_vec (4, 2) and turns (number of actions,)
// int64. The reward and the family's outcome stay in Python.
std::vector<Tensor> minigrid_transition(const Tensor& action_in, const Tensor& grid,
                                        const Tensor& agent_pos_in, const Tensor& agent_dir_in,
                                        const Tensor& carrying, const Tensor& step_count_in,
                                        const Tensor& dir_to_vec_in, const Tensor& turns_in,
                                        const Tensor& codes_in) {
  TORCH_CHECK(grid.scalar_type() == at::kByte && grid.dim() == 4 && grid.size(3) == 4 &&
                  grid.is_contiguous() && carrying.scalar_type() == at::kByte &&
                  carrying.is_contiguous(),
              "minigrid_transition: grid (N, W, H, 4) and carrying (N, 4) contiguous uint8");
  const MiniGridCodes codes(codes_in);
  const int64_t envs = grid.size(0), width = grid.size(1), height = grid.size(2);
  const Tensor action = action_in.contiguous(), agent_pos = agent_pos_in.contiguous();
  const Tensor agent_dir = agent_dir_in.contiguous(), step_count = step_count_in.contiguous();
  const Tensor dir_to_vec = dir_to_vec_in.contiguous(), turns = turns_in.contiguous();
  const int64_t* a = action.data_ptr<int64_t>();
  const int64_t* turn = turns.data_ptr<int64_t>();
  const int64_t* vec = dir_to_vec.data_ptr<int64_t>();
  const int64_t* dirs = agent_dir.data_ptr<int64_t>();
  const int64_t* pos = agent_pos.data_ptr<int64_t>();
  const int64_t* count = step_count.data_ptr<int64_t>();
  const int64_t actions = turns.numel();
  Tensor count_out = at::empty_like(step_count), dir_out = at::empty_like(agent_dir);
  Tensor pos_out = at::empty_like(agent_pos);
  Tensor goal = at::empty({envs}, action.options().dtype(at::kBool));
  Tensor lava = at::empty({envs}, action.options().dtype(at::kBool));
  int64_t* count_next = count_out.data_ptr<int64_t>();
  int64_t* dir_next = dir_out.data_ptr<int64_t>();
  int64_t* pos_next = pos_out.data_ptr<int64_t>();
  bool* on_goal = goal.data_ptr<bool>();
  bool* on_lava = lava.data_ptr<bool>();
  int32_t* cells = reinterpret_cast<int32_t*>(grid.data_ptr<uint8_t>());
  int32_t* carried = reinterpret_cast<int32_t*>(carrying.data_ptr<uint8_t>());
  for (int64_t n = 0; n < envs; ++n) {
    TORCH_CHECK(a[n] >= 0 && a[n] < actions, "MiniGrid's step: env ", n, " was given action ",
                a[n], ", not one of 0..", actions - 1);
    const int64_t dir = dirs[n], x = pos[2 * n], y = pos[2 * n + 1];
    TORCH_CHECK(dir >= 0 && dir < 4, "MiniGrid's step: env ", n, " faces direction ", dir);
    const int64_t fx = x + vec[2 * dir], fy = y + vec[2 * dir + 1];
    TORCH_CHECK(fx >= 0 && fx < width && fy >= 0 && fy < height, "MiniGrid's step: env ", n,
                " faces (", fx, ", ", fy, "), outside its world (the worlds are walled round)");
    int32_t& cell_ref = cells[(n * width + fx) * height + fy];
    const int32_t cell = cell_ref, kind = cell & 0xFF, state = cell >> 16;
    count_next[n] = count[n] + 1;
    dir_next[n] = (dir + turn[a[n]]) % 4;
    const bool forward = a[n] == codes.forward, moves = forward && codes.can_overlap(cell);
    pos_next[2 * n] = moves ? fx : x;
    pos_next[2 * n + 1] = moves ? fy : y;
    on_goal[n] = forward && kind == codes.goal;
    on_lava[n] = forward && kind == codes.lava;
    const int32_t held = carried[n];
    const bool holding = held != codes.nothing, toggle = a[n] == codes.toggle;
    const bool picks = a[n] == codes.pickup && codes.can_pickup(cell) && !holding;
    const bool drops = a[n] == codes.drop && cell == codes.nothing && holding;
    // a locked door opens with a key of its colour (env.py's _transition says how)
    const bool unlocks = toggle && kind == codes.door && state == codes.locked &&
                         held == ((cell & 0xFF00) | codes.key);
    const bool swings = toggle && kind == codes.door && state != codes.locked;
    const int32_t new_state = (unlocks || (swings && state == codes.closed))
                                  ? codes.open
                                  : (swings ? codes.closed : state);
    cell_ref = (picks || (toggle && kind == codes.box))
                   ? codes.nothing
                   : (drops ? held : ((cell & 0xFFFF) | (new_state << 16)));
    carried[n] = picks ? cell : (drops ? codes.nothing : held);
  }
  return {count_out, dir_out, pos_out, goal, lava};
}

// MiniGrid's Grid.process_vis over one view of packed cells, view[i * size + j] (column i, row
// j, the agent at (size / 2, size - 1)), into mask (the same layout): the reference loop that
// view.py's docstring quotes, row by row from the agent's upwards.
void minigrid_visibility(const int32_t* view, bool* mask, int64_t size,
                         const MiniGridCodes& codes) {
  std::fill_n(mask, size * size, false);
  mask[(size / 2) * size + size - 1] = true;
  auto mark = [&](int64_t i, int64_t j, int64_t beside) {  // sight passes from (i, j)
    mask[beside * size + j] = true;
    if (j > 0) {
      mask[beside * size + j - 1] = true;
      mask[i * size + j - 1] = true;
    }
  };
  for (int64_t j = size - 1; j >= 0; --j) {
    for (int64_t i = 0; i + 1 < size; ++i) {
      if (mask[i * size + j] && codes.see_behind(view[i * size + j])) mark(i, j, i + 1);
    }
    for (int64_t i = size - 1; i >= 1; --i) {
      if (mask[i * size + j] && codes.see_behind(view[i * size + j])) mark(i, j, i - 1);
    }
  }
}

// Every env's gen_obs()["image"] (N, size, size, 3) uint8: view cell (i, j) shows the world
// cell agent_pos + offsets[agent_dir, i, j] (a grey wall beyond the world's edge), unseen cells
// (0, 0, 0) unless see_through_walls, the agent's own cell what it carries.
Tensor minigrid_view(const Tensor& grid, const Tensor& agent_pos_in, const Tensor& agent_dir_in,
                     const Tensor& carrying_in, const Tensor& offsets_in, bool see_through_walls,
                     const Tensor& codes_in) {
  TORCH_CHECK(grid.scalar_type() == at::kByte && grid.dim() == 4 && grid.size(3) == 4 &&
                  carrying_in.scalar_type() == at::kByte,
              "minigrid_view: grid (N, W, H, 4) and carrying (N, 4) uint8");
  const MiniGridCodes codes(codes_in);
  const Tensor world = grid.contiguous(), carrying = carrying_in.contiguous();
  const Tensor agent_pos = agent_pos_in.contiguous(), agent_dir = agent_dir_in.contiguous();
  const Tensor offsets = offsets_in.contiguous();
  const int64_t envs = world.size(0), width = world.size(1), height = world.size(2);
  const int64_t size = offsets.size(1);
  Tensor image = at::empty({envs, size, size, 3}, world.options());
  const int32_t* cells = reinterpret_cast<const int32_t*>(world.data_ptr<uint8_t>());
  const int32_t* carried = reinterpret_cast<const int32_t*>(carrying.data_ptr<uint8_t>());
  const int64_t* offset = offsets.data_ptr<int64_t>();
  uint8_t* out = image.data_ptr<uint8_t>();
  std::vector<int32_t> view(size * size);
  std::vector<uint8_t> mask(size * size);  // bool's storage, which std::vector<bool> is not
  const int64_t* dirs = agent_dir.data_ptr<int64_t>();
  const int64_t* pos = agent_pos.data_ptr<int64_t>();
  for (int64_t n = 0; n < envs; ++n) {
    const int64_t dir = dirs[n], x = pos[2 * n], y = pos[2 * n + 1];
    TORCH_CHECK(dir >= 0 && dir < 4, "MiniGrid's view: env ", n, " faces direction ", dir);
    const int64_t* from = offset + dir * size * size * 2;
    const int32_t* world_n = cells + n * width * height;
    for (int64_t k = 0; k < size * size; ++k) {
      const int64_t cx = x + from[2 * k], cy = y + from[2 * k + 1];
      const bool inside = cx >= 0 && cx < width && cy >= 0 && cy < height;
      view[k] = inside ? world_n[cx * height + cy] : codes.wall_cell;
    }
    bool* seen = reinterpret_cast<bool*>(mask.data());
    if (!see_through_walls) minigrid_visibility(view.data(), seen, size, codes);
    view[(size / 2) * size + size - 1] = carried[n];
    uint8_t* image_n = out + n * size * size * 3;
    for (int64_t k = 0; k < size * size; ++k) {
      const bool shown = see_through_walls || seen[k] || k == (size / 2) * size + size - 1;
      const int32_t cell = shown ? view[k] : 0;
      image_n[3 * k] = static_cast<uint8_t>(cell & 0xFF);
      image_n[3 * k + 1] = static_cast<uint8_t>((cell >> 8) & 0xFF);
      image_n[3 * k + 2] = static_cast<uint8_t>((cell >> 16) & 0xFF);
    }
  }
  return image;
}
