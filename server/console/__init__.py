"""The operator console (issue 11): instance management and the agent designer, at /console."""
