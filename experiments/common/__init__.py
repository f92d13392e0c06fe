"""What every pipeline of experiments shares: steps and how they run
(pipeline), the skeleton of a command made of steps (skeleton), where the
repository and its data are (paths), the readers of what steps wrote
(result_files), and the teachers the chains start from."""
