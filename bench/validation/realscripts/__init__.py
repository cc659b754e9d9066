"""Helpers of ``bench/validation/realscripts_validation.py``: data generation, child processes, report reading,
the scenario table and the Hugging Face ``Trainer`` driver.

Why a package: the validation script reads as the measurement sequence; the plumbing (what every
third-party script needs on disk, how a child is bounded and killed, how a gpudoctor JSON report
becomes a record) is kept apart so each piece stays short. Nothing here imports torch or gpudoctor:
both run only in child processes.
"""
