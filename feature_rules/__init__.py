"""feature_rules."""
