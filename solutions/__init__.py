"""Reference solutions for transformer-drills. Never shipped to students."""
