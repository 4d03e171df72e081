"""The baselines every run is scored beside: simple rules, ridge, gbm, oracles."""
