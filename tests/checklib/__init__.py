"""Support code for the graded checks: comparisons with teaching messages, weights, inputs."""
