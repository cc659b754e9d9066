"""Static checks for ``gpudoctor check``: files in, fact sets out — never findings.

Checkers read training code (standard ``ast``, one parse and one walk per file), Dockerfiles, shell
launchers, Compose files and Kubernetes manifests, plus (``--env``) the current machine. They emit
:class:`~gpudoctor.model.FactSet` objects of source ``static`` (``env`` for the machine); the rule
files under ``rules/`` decide what is a problem. This package must never import torch, rich or
textual, and must never run or import the code it checks.

Scopes a rule's ``[[when]]`` can use (facts in brackets; every Python site also has
``file_uses_cuda``, every site ``file_kind``):

- ``python.dataloader`` [num_workers (-1 = not a literal), pin_memory, persistent_workers
  ("true"/"false"/"unset"/"dynamic"), sampler_given, file_uses_ddp, file_has_distributed_sampler,
  file_is_entry_point]
- ``python.loop_call`` [kind: item/cpu/tolist/numpy/print/synchronize, call, periodic, in_step_function]
- ``python.training_loop`` [has_autocast, in_step_function] · ``python.grad_accumulation`` [call]
- ``python.host_tensor_copy`` [call, factory, periodic] · ``python.non_blocking`` [call]
- ``python.compiled_forward`` [breaker, call, certain] · ``python.autocast_backward`` · ``python.fp16_autocast``
- ``python.deprecated_amp`` [api, replacement] · ``python.optimizer`` [optimizer, foreach]
- ``python.ddp`` [find_unused_parameters] · ``python.process_group`` [backend] · ``python.data_parallel``
- ``python.whole_dataset_load`` [reader, call, file_uses_ddp, file_has_distributed_sampler, file_is_entry_point] · ``python.checkpoint`` [use_reentrant]
- ``python.conv_layer`` [layer] · ``python.conv_bias_bn`` [layer, certain] · ``python.zero_grad`` ·
  ``python.anomaly_detection`` · ``python.torch_load`` [call]
- ``docker.base_image`` [image, repo, tag, tag_state: digest/version/variable/floating/latest/none, gpu_image]
- ``docker.entrypoint`` [instruction, form: exec/shell/exec-sh-c, uses_exec, runs_launcher, command]
- ``deploy.env`` [name, value] (Dockerfile ENV, shell export, Compose environment, Kubernetes env)
- ``deploy.shm`` [workload, gpu, shm_configured, shm_size_mib (-1 unknown), ipc_host]
- ``k8s.container`` [container, gpu_requests, gpu_limits] · ``launch.command`` [launcher, command]
- ``file.error`` [reason, detail] · ``run`` [project_uses_cuda, project_uses_ddp,
  project_has_distributed_sampler, project_pins_memory, project_cudnn_benchmark, project_uses_no_sync,
  project_has_grad_scaler, project_has_autocast, project_dataloader_workers, project_uses_compile,
  project_python_files]
- env ``machine`` [driver_version, driver_cuda(_version), torch_version, torch_cuda(_version), gpu_count,
  cudnn_build, cudnn_runtime, cudnn_versions_differ, nccl_version, shm_size_mib, cuda_visible_devices(_unmatched), ptrace_scope, cap_sys_ptrace,
  ptrace_permitted, ptrace_reason, is_root]
"""
