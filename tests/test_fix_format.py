"""`portscan fix` writes the code as the user wrote it (issue 19): multi-line calls stay
multi-line in their own style, no trailing whitespace, continuation lines where the
user's style puts them, blank lines and comments around removed code kept sensible, a
conditional not rewritten into ``X if c else X``, and autocast around the loss only.

Each input is shaped like real training code; each expected output is the exact text."""

from __future__ import annotations

import ast
import textwrap

import pytest

from portscan.fix.engine import FileFix, fix_source
from portscan.ruleset.loader import RuleSet


def fixed(rules: RuleSet, source: str) -> FileFix:
    """``portscan fix --unsafe-fixes`` on one dedented source; the output must parse and
    have no trailing whitespace on any line."""
    result = fix_source(textwrap.dedent(source), "train.py", rules, unsafe=True)
    assert result.error is None
    ast.parse(result.fixed)
    assert [line for line in result.fixed.splitlines() if line != line.rstrip()] == []
    return result


def check(rules: RuleSet, before: str, after: str) -> None:
    assert fixed(rules, before).fixed == textwrap.dedent(after)


# ----------------------------------------------------------------------------- call layout


def test_a_hanging_call_is_not_joined_into_one_line(rules) -> None:
    """The first comma's `, ` was used between every argument: 150-character lines."""
    check(rules, """
        from apex.optimizers import FusedAdam

        optimizer = FusedAdam(model.parameters(), lr=args.learning_rate,
                              betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_epsilon,
                              bias_correction=True, adam_w_mode=True)
        """, """
        import torch

        optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate,
                                      betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_epsilon,
                                      weight_decay=0.0)
        """)


def test_arguments_aligned_with_the_parenthesis_move_with_it(rules) -> None:
    check(rules, """
        from apex.normalization import FusedLayerNorm

        class Block:
            def __init__(self, dim):
                self.norm = FusedLayerNorm(dim,
                                           1e-6,
                                           True)
        """, """
        import torch

        class Block:
            def __init__(self, dim):
                self.norm = torch.nn.LayerNorm(dim,
                                               1e-6,
                                               True)
        """)


def test_comment_lines_and_nested_lines_move_with_an_aligned_call(rules) -> None:
    check(rules, """
        from apex.optimizers import FusedAdam

        optimizer = FusedAdam(params,
                              # the schedule sets the learning rate
                              lr=0.0,
                              betas=(0.9,
                                     0.95))
        """, """
        import torch

        optimizer = torch.optim.AdamW(params,
                                      # the schedule sets the learning rate
                                      lr=0.0,
                                      betas=(0.9,
                                             0.95),
                                      weight_decay=0.0)
        """)


def test_a_hanging_indent_stays_where_it_is(rules) -> None:
    check(rules, """
        from apex.optimizers import FusedAdam

        optimizer = FusedAdam(params,
            lr=args.lr)  # warmup follows
        """, """
        import torch

        optimizer = torch.optim.AdamW(params,
            lr=args.lr,
            weight_decay=0.0)  # warmup follows
        """)


def test_one_argument_per_line_with_a_trailing_comma(rules) -> None:
    """The added argument gets a line of its own; the comments stay with their arguments."""
    check(rules, """
        from apex.optimizers import FusedAdam

        optimizer = FusedAdam(
            params,
            lr=args.lr,  # peak learning rate
            eps=1e-8,  # as in the paper
        )
        """, """
        import torch

        optimizer = torch.optim.AdamW(
            params,
            lr=args.lr,  # peak learning rate
            eps=1e-8,  # as in the paper
            weight_decay=0.0,
        )
        """)


def test_a_closing_parenthesis_on_its_own_line(rules) -> None:
    """The line break before `)` ended up after the comma: an empty line of spaces and
    the added argument at column 0."""
    check(rules, """
        from apex.optimizers import FusedAdam

        optimizer = FusedAdam(
            params,
            lr=args.lr,
            eps=1e-8  # apex's default
        )
        """, """
        import torch

        optimizer = torch.optim.AdamW(
            params,
            lr=args.lr,
            eps=1e-8,  # apex's default
            weight_decay=0.0
        )
        """)


def test_arguments_on_one_line_inside_a_hanging_call(rules) -> None:
    """`elementwise_affine=True, ` with a trailing space and the added argument below,
    unindented."""
    check(rules, """
        from apex.normalization import FusedRMSNorm

        class Block:
            def __init__(self, config):
                self.norm = FusedRMSNorm(
                    config.hidden_size, elementwise_affine=True, memory_efficient=False
                )
        """, """
        import torch

        class Block:
            def __init__(self, config):
                self.norm = torch.nn.RMSNorm(
                    config.hidden_size, elementwise_affine=True, eps=1e-05
                )
        """)


def test_an_added_argument_takes_the_place_of_a_dropped_one(rules) -> None:
    check(rules, """
        from apex.normalization import FusedRMSNorm

        norm = FusedRMSNorm(config.hidden_size,
                            elementwise_affine=True,
                            memory_efficient=True)
        """, """
        import torch

        norm = torch.nn.RMSNorm(config.hidden_size,
                                elementwise_affine=True,
                                eps=1e-05)
        """)


def test_a_dropped_argument_takes_its_comment_along(rules) -> None:
    check(rules, """
        from apex.optimizers import FusedAdam

        optimizer = FusedAdam(
            params,
            lr=args.lr,
            set_grad_none=True,  # faster zero_grad
        )
        """, """
        import torch

        optimizer = torch.optim.AdamW(
            params,
            lr=args.lr,
            weight_decay=0.0,
        )
        """)


def test_positional_arguments_become_keywords_in_place(rules) -> None:
    check(rules, """
        from apex.optimizers import FusedAdam

        opt = FusedAdam(params, 1e-3, True, (0.9, 0.999),
                        1e-8, False, 0.01)
        """, """
        import torch

        opt = torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999),
                               eps=1e-8, weight_decay=0.01)
        """)


def test_a_dropped_keyword_on_its_own_line(rules) -> None:
    check(rules, """
        from apex.parallel import DistributedDataParallel as DDP

        model = DDP(model,
                    delay_allreduce=True)
        """, """
        import torch

        model = torch.nn.parallel.DistributedDataParallel(model)
        """)


# ----------------------------------------------------------------------------- removed code


def test_a_removed_local_import_leaves_no_blank_line_at_the_top_of_the_body(rules) -> None:
    check(rules, """
        import torch


        def build_optimizer(model, args):
            from apex.optimizers import FusedAdam

            params = [p for p in model.parameters() if p.requires_grad]
            return FusedAdam(params, lr=args.lr)


        def build_norm(dim, fused):
            if fused:
                from apex.normalization import FusedLayerNorm

                # one kernel for mean, variance and affine
                return FusedLayerNorm(dim)
            return torch.nn.LayerNorm(dim)
        """, """
        import torch


        def build_optimizer(model, args):
            params = [p for p in model.parameters() if p.requires_grad]
            return torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)


        def build_norm(dim, fused):
            if fused:
                # one kernel for mean, variance and affine
                return torch.nn.LayerNorm(dim)
            return torch.nn.LayerNorm(dim)
        """)


def test_a_removed_first_import_leaves_no_blank_line_at_the_top_of_the_file(rules) -> None:
    check(rules, """
        from apex.optimizers import FusedAdam

        import torch

        optimizer = FusedAdam(model.parameters())
        """, """
        import torch

        optimizer = torch.optim.AdamW(model.parameters(), weight_decay=0.0)
        """)


def test_a_deleted_first_statement_leaves_no_blank_line_at_the_top_of_the_body(rules) -> None:
    check(rules, """
        import torch
        from apex import amp


        def setup():
            amp.register_float_function(torch, "sigmoid")

            # the head runs in fp32
            return torch.nn.Linear(8, 2)
        """, """
        import torch


        def setup():
            # the head runs in fp32
            return torch.nn.Linear(8, 2)
        """)


def test_blank_lines_between_paragraphs_stay(rules) -> None:
    check(rules, """
        import os
        from apex.optimizers import FusedAdam

        import torch

        optimizer = FusedAdam(model.parameters())
        """, """
        import os

        import torch

        optimizer = torch.optim.AdamW(model.parameters(), weight_decay=0.0)
        """)


# ----------------------------------------------------------------------------- compatibility branches


@pytest.mark.parametrize("line", [
    "norm = FusedLayerNorm(hidden) if apex_available else LayerNorm(hidden)",
    "norm = FusedLayerNorm(hidden) if apex_available else nn.LayerNorm(hidden)",
    "norm = FusedLayerNorm(hidden) if apex_available else torch.nn.LayerNorm(hidden)",
])
def test_a_conditional_that_already_has_the_target_is_left(rules, line: str) -> None:
    """Rewritten, both branches would be the same (`X if c else X`), under any import."""
    source = textwrap.dedent("""
        import torch
        import torch.nn as nn
        from torch.nn import LayerNorm
        from apex.normalization import FusedLayerNorm

        """) + line + "\n"
    result = fixed(rules, source)
    assert not result.changed
    assert [(n.rule, n.reason) for n in result.not_fixed] == [
        ("PS210", "a compatibility branch next to `nn.LayerNorm`; left as it is")]


def test_a_conditional_between_aliases_is_left(rules) -> None:
    source = textwrap.dedent("""
        from apex.parallel import DistributedDataParallel as ApexDDP
        from torch.nn.parallel import DistributedDataParallel as DDP

        wrapper = ApexDDP if args.apex else DDP
        model = wrapper(model)
        """)
    result = fixed(rules, source)
    assert not result.changed
    assert [n.rule for n in result.not_fixed] == ["PS222"]


def test_a_conditional_between_other_classes_is_still_rewritten(rules) -> None:
    check(rules, """
        from apex.normalization import FusedLayerNorm

        norm = FusedLayerNorm(hidden) if fused else RMSNorm(hidden)
        """, """
        import torch

        norm = torch.nn.LayerNorm(hidden) if fused else RMSNorm(hidden)
        """)


# ----------------------------------------------------------------------------- autocast region


def test_autocast_wraps_the_forward_pass_and_the_loss_only(rules) -> None:
    """Learning-rate updates and timing before the forward pass, and the loss's all-reduce,
    `zero_grad` and timing after it, stay where they were."""
    check(rules, """
        import time

        import torch
        import torch.distributed as dist
        from apex import amp


        def train(args, model, optimizer, loader, criterion, scheduler):
            model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
            end = time.time()
            for step, (images, target) in enumerate(loader):
                data_time = time.time() - end
                lr = scheduler(step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                images = images.cuda(non_blocking=True)
                target = target.cuda(non_blocking=True)

                # compute output
                output = model(images)
                loss = criterion(output, target)

                reduced_loss = loss.detach().clone()
                dist.all_reduce(reduced_loss)
                reduced_loss /= args.world_size

                optimizer.zero_grad()
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                optimizer.step()
                torch.cuda.synchronize()
                batch_time = time.time() - end
                end = time.time()
        """, """
        import time

        import torch
        import torch.distributed as dist


        def train(args, model, optimizer, loader, criterion, scheduler):
            scaler = torch.amp.GradScaler("cuda")
            end = time.time()
            for step, (images, target) in enumerate(loader):
                data_time = time.time() - end
                lr = scheduler(step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                with torch.amp.autocast("cuda", dtype=torch.float16):
                    images = images.cuda(non_blocking=True)
                    target = target.cuda(non_blocking=True)

                    # compute output
                    output = model(images)
                    loss = criterion(output, target)

                reduced_loss = loss.detach().clone()
                dist.all_reduce(reduced_loss)
                reduced_loss /= args.world_size

                optimizer.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                torch.cuda.synchronize()
                batch_time = time.time() - end
                end = time.time()
        """)


def test_autocast_keeps_unrelated_statements_between_needed_ones(rules) -> None:
    """Statements between two the loss needs stay inside (one block, not several); an
    attribute update (`self.step += 1`) is not a change to `self.model`."""
    check(rules, """
        from apex import amp


        class Trainer:
            def fit(self, loader):
                self.model, self.optimizer = amp.initialize(self.model, self.optimizer)
                for batch in loader:
                    self.step += 1
                    inputs = batch["input"].cuda()
                    self.meter.update(inputs.size(0))
                    outputs = self.model(inputs)
                    loss = outputs.loss / self.accumulation
                    self.log(loss.item())
                    with amp.scale_loss(loss, self.optimizer) as scaled:
                        scaled.backward()
                    self.optimizer.step()
        """, """
        import torch


        class Trainer:
            def fit(self, loader):
                scaler = torch.amp.GradScaler("cuda")
                for batch in loader:
                    self.step += 1
                    with torch.amp.autocast("cuda", dtype=torch.float16):
                        inputs = batch["input"].cuda()
                        self.meter.update(inputs.size(0))
                        outputs = self.model(inputs)
                        loss = outputs.loss / self.accumulation
                    self.log(loss.item())
                    scaler.scale(loss).backward()
                    scaler.step(self.optimizer)
                    scaler.update()
        """)
