"""The computer agent: a screenshot → action loop over a desktop in the sandbox,
native on every provider's computer-use wire."""
