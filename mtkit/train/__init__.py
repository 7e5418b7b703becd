"""The `mtkit train` stage: the loop, TrainState, losses, schedules, validation, DDP setup."""
