"""Feature tests: secrets, redaction, compaction, project instructions, notifier, telemetry."""
