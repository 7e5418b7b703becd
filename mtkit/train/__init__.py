"""The `mtkit train` stage (the loop, TrainState, losses, schedules, validation, DDP setup) and the
stages that work on trained checkpoints: `mtkit average` and `mtkit distill`.
"""
