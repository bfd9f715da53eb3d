"""The ReLSTM paper's MiniGrid transfer table (Table 3): ``suite`` trains and evaluates,
``aggregate`` tabulates."""
