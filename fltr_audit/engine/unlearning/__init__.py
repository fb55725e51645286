"""Forgetting clients of a trained federation (issue 41): the unlearning methods and what the server
stores for them (``history``), run by ``fltr_audit.runs.unlearning``.

* ``retrain`` -- training from scratch without the forgotten clients (the reference: they are absent
  from every cohort; ``TrainSettings.absent``);
* ``federaser`` -- FedEraser (Liu et al., IWQoS 2021) as Wang, Liu & Zuccon adapt it to FOLTR (ECIR
  2024): the server keeps the clients' updates every ``interval`` rounds and rebuilds the model from
  them, each remaining client's update calibrated by a short retraining (``federaser``);
* ``finetune`` -- more rounds of the remaining clients on the trained model;
* ``pga`` -- projected gradient ascent (Halimi et al. 2022): the forgotten clients step against their
  gradient inside a ball around a reference model, then the remaining clients fine-tune (``pga``);
* ``none`` -- the trained model itself (the control).

An algorithm declares the methods it supports on its spec (``AlgorithmSpec.unlearning``).
"""

METHODS = ("retrain", "federaser", "finetune", "pga", "none")
"""Every unlearning method, the reference first."""
