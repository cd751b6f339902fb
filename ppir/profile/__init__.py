"""``ppir profile``: measure a user's model on this machine and write a cost file.

Contract
--------
* The model is a *model module* (``build_stage(stage, num_stages)``, ``make_batch(step)``,
  ``loss_fn(output, target)``; optionally ``configure(**options)``), the contract of ppir's
  runtime (docs/executor.md).
* :func:`ppir.profile.launch.profile` builds the model in ``stages`` pieces and runs a real
  1F1B over ``ranks`` processes (gloo on CPU, NCCL on GPUs; one process when ``ranks`` is 1), each
  rank holding ``stages / ranks`` consecutive pieces chained as the runtime chains the stages of
  one rank (each its own autograd graph, called and fed as the runtime calls a stage:
  :mod:`.pieces`; a tuple or dict boundary's message counts all its tensors).  Every piece's
  forward, backward, backward-input and backward-weight is timed *inside* that run, all ranks
  computing at once as a schedule runs them: the timed steps run in turn full backwards,
  backwards split into I then W with the runtime's own split (:mod:`ppir.torch.backward`: W
  runs only the weight half of each weight node, so I + W costs what B costs, not more, and a
  first piece's I is empty), and I then the previous microbatch's W (``W_late``: a W whose
  saved tensors waited through another microbatch's F and I, as ZB-H1's last stage runs it;
  from the third timed step on).  Afterwards, still on all ranks at once, each piece runs a
  forward and a backward back to back (F&B), each rank boundary is timed with a ping-pong of
  the real boundary value, and the bytes autograd saves in one forward of each piece are
  counted with saved-tensor hooks (parameters excluded); last, the model's optimizer steps once
  over each piece's parameters and the bytes of its state are counted
  (:func:`ppir.torch.model.optimizer_state_bytes`).  Two more orders follow (:mod:`.orders`;
  ``--no-orders`` skips them): interleaved 1F1B with every piece a stage placed round-robin
  (every input received from another rank) and 1F1B with the rank cuts one piece earlier
  (every boundary 1F1B sends across kept on a rank), so that each piece's F, B and I are
  timed both with their input made on their rank (near) and received (far).
* The last piece's loss is checked as the runtime checks it
  (:func:`ppir.torch.model.scalar_loss`): a ``loss_fn`` that does not return a scalar tensor
  computed by autograd is the runtime's one-line error naming the rank, stage and microbatch;
  so is a NaN or infinite loss (:func:`ppir.torch.model.nonfinite_loss`, each microbatch of
  every step), which stops the profile: no cost file is written.
* The result is :class:`ppir.analysis.measured.MeasuredCosts` (per piece: trimmed means of the
  samples; ``step_time``: the median wall time of the timed 1F1B steps with whole backwards),
  written as the ``[measured]`` table of a TOML cost file; a schedule with S stages uses it
  when S divides ``stages``.  ``ppir profile`` then holds the file to its own run
  (:mod:`.selfcheck`): the estimate of that 1F1B program from the file against ``step_time``.
* torch is imported by the modules that run on the ranks (:mod:`.worker`, :mod:`.measure`,
  :mod:`.pieces`, :mod:`.fb`, :mod:`.transfer`) and by :mod:`.launch` when it runs; the
  summary, the samples and the self-check import without it.
"""
