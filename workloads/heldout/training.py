"""The training loop the held-out steps share (step.py, random_step.py).

Every step runs one wave per entry of `waves`, then AdamW's step and
zero_grad(set_to_none=True) - once per step when the model accumulates
gradients over its waves, after every wave when it does not; at the end what
peakscope buffered is written and the annotations come off.
"""

import peakscope


def train_steps(steps, waves, run_wave, optimizer, accumulate=True, rotate=False):
    """Runs `run_wave(step, index, wave)` for every wave of every step;
    returns how many optimizer steps ran. With `rotate`, step k starts at
    wave k (mod the count), as a data loader's steps do not all start with
    one wave: in an accumulating step the first wave makes the gradients,
    and a calibration needs them made at more than one size."""
    optimizer_steps = 0
    for step in range(steps):
        first = step % len(waves) if rotate and waves else 0
        for index in list(range(first, len(waves))) + list(range(first)):
            run_wave(step, index, waves[index])
            if not accumulate:
                end_step(optimizer)
                optimizer_steps += 1
        if accumulate:
            end_step(optimizer)
            optimizer_steps += 1
    return optimizer_steps


def end_step(optimizer):
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def end_run(annotations):
    """Writes what is buffered and takes the annotations off again."""
    peakscope.flush()
    for annotation in annotations:
        annotation.remove()
