"""Training stage: the loop, losses, schedules, checkpoints, distributed setup."""
