"""GPU pods behind the budget guard: a provider interface, RunPod and local providers, kill paths.

Modules: ``base`` (the interface and errors), ``runpod`` / ``runpod_api`` (RunPod through its SDK),
``local`` (this machine's GPUs), ``ssh`` (asyncssh client), ``deadman`` (the pod's own dead-man
switch), ``reaper`` (the client terminates until confirmed), ``sweep`` and ``names`` (the sweep:
orphans by name and session liveness), ``lease`` (one pod under the budget, in order), ``session``
and ``plugin`` (pytest wiring: ``--gpu-provider``, the ``gpu_pod`` fixture). Import-light: the SDK,
asyncssh and rich load only when a pod is wanted.
"""
