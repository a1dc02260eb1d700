"""Stage 2: probes on the feature cache, one (encoder, task) unit at a time; RunFolder owns the run folder."""
