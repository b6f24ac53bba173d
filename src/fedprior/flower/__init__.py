"""fedprior on Flower: a ServerApp and a ClientApp that run any fedprior algorithm (docs/flower.md).

Needs the optional ``flower`` extra (``flwr[simulation]==1.41.0``). One job per file:

- ``records``: Broadcast / Reply / State <-> ArrayRecord, ConfigRecord, MetricRecord;
- ``server_app``: the round loop over Flower's Grid (the ServerApp ``flwr run`` loads, which
  builds experiments, is ``fedprior.experiments.flower_app``);
- ``client_app``: the ClientApp (client updates, per-client state in the node's Context);
- ``client_state``: that per-client state, with a versioned copy on the node's disk;
- ``export``: a node's files (the task and its clients' partitions), written and read;
- ``simulation``: ``run.runtime = "flower-sim"`` on Flower's simulation engine (Ray);
- ``local``: a SuperLink and N SuperNodes as real processes on this machine (TLS or not);
- ``runtime``: the entry point the experiment runner calls.

Importing this package does not import Flower; its modules do.
"""
