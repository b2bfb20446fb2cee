"""The KRaft collector: follows the metadata log as an observer of the controller quorum."""
