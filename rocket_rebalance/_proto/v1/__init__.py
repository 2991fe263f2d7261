"""Generated protobuf and gRPC code for the rocket-rebalance wire. Do not edit: run `make proto`."""
