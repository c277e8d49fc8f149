"""Scripts that ``torchrun`` launches from tests/integration/test_trainer_distributed.py
(one process per rank), and the cases they share with the test."""
