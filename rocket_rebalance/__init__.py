"""rocket-rebalance."""
