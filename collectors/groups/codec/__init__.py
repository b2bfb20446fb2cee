"""How `__consumer_offsets` and `__share_group_state` records are read: Kafka's byte layouts, every
group protocol's records, checked field by field. Below the groups' model and their I/O: it imports
nothing else of the groups collector."""
