"""Static checks for ``gpudoctor check``: files in, fact sets out — never findings.

Checkers read training code (standard ``ast``, one parse and one walk per file), Dockerfiles, shell
launchers, Compose files and Kubernetes manifests, plus (``--env``) the current machine. They emit
:class:`~gpudoctor.model.FactSet` objects of source ``static`` (``env`` for the machine); the rule
files under ``rules/`` decide what is a problem. This package must never import torch, rich or
textual, and must never run or import the code it checks.

The scopes a rule's ``[[when]]`` can use and the facts of each (name, unit, producer, doc) are in
``docs/facts.md``, generated from the fact registry (:mod:`gpudoctor.catalog.registry`): a checker
that emits a new fact declares it there. Sites of these Python scopes carry only the facts every
Python site has (``call``, ``file_kind``, ``file_uses_cuda``), so the page has no table for them:
``python.grad_accumulation``, ``python.non_blocking``, ``python.autocast_backward``,
``python.fp16_autocast``, ``python.data_parallel``, ``python.zero_grad``, ``python.anomaly_detection``,
``python.torch_load``.
"""
