"""The V-Half and V-Min schedules of Qi et al., NeurIPS'24 ("Pipeline Parallelism with
Controllable Memory"), ported from the authors' code: sail-sg/zero-bubble-pipeline-parallelism,
``megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py`` at commit
39f2c186a27580b7051eb51e0f651e1efd0a8170 (BSD-3-Clause, NVIDIA and the authors).

``stable_pattern_v_min``, ``stable_pattern_v_half``, ``put_w``, ``mem_of_stage``,
``eager_execution_time``, ``reorder`` and ``schedule_from_pattern`` are the methods of that
file's ``PipelineGraph`` with ``self`` dropped (``n_stage``/``n_micro`` become arguments); their
bodies are unchanged but for line breaks and unused loop variables named ``_``.

Pass types: 0 ``F`` chunk-0 forward, 1 ``f`` chunk-1 forward, 2 ``B`` chunk-1 backward-input,
3 ``b`` chunk-0 backward-input, 4/5 ``W``/``w`` the weight passes of chunk 1 and chunk 0
(``create_schedule`` maps them so).  The "stage" of that code is a rank.
"""

from __future__ import annotations


def stable_pattern_v_min(num_stages):
    interval = 2 if num_stages % 3 == 0 else 0
    schedule = []
    for i in range(num_stages):
        schedule.append(
            [
                i,
                num_stages * 2 - i - 1,
                num_stages * 2 + interval + i,
                num_stages * 4 + interval - i - 1,
            ]
        )
    return schedule


def stable_pattern_v_half(num_stages):
    interval = 3 if num_stages % 2 == 0 else 0
    schedule = []
    for i in range(num_stages):
        schedule.append(
            [
                i * 2,
                num_stages * 3 - i - 2,
                num_stages * 3 + interval + i * 2 - 1,
                num_stages * 6 + interval - i - 2,
            ]
        )
    return schedule


def put_w(schedule, split_w=False):
    assert len(schedule) == 4
    bound = max([x[-1] for x in schedule])
    inf = bound + 1
    schedule.append([])
    if split_w:
        schedule.append([])
    w_cnt = [0, 0]
    p = [0 for _ in schedule]

    for i in range(bound + 1):
        next_time, next_type = min(
            [(schedule[t][p[t]] if p[t] < len(schedule[t]) else inf, t) for t in range(4)]
        )
        assert next_time != inf
        if next_time == i:
            p[next_type] += 1
            if 2 <= next_type < 4:
                w_cnt[next_type - 2 if split_w else 0] += 1
        else:
            for w in range(2):
                if w_cnt[w]:
                    schedule[w + 4].append(i)
                    w_cnt[w] -= 1
                    break
    for w in range(2):
        while w_cnt[w] > 0:
            i += 1
            schedule[w + 4].append(i)
            w_cnt[w] -= 1
    return schedule


def mem_of_stage(schedule):
    memory = [1, 1, 0, 0, -1]
    has_w = len(schedule) > 4
    bound = max([x[-1] for x in schedule])
    inf = bound + 1
    w_cnt = 0
    cur = 0
    res = 0
    p = [0 for _ in schedule]
    for i in range(bound + 1):
        next_time, next_type = min(
            [
                (schedule[t][p[t]] if p[t] < len(schedule[t]) else inf, t)
                for t in range(len(schedule))
            ]
        )
        assert next_time != inf
        if next_time == i:
            p[next_type] += 1
            cur += memory[next_type]
            if 2 <= next_type < 4:
                w_cnt += 1
        elif not has_w:
            if w_cnt:
                cur += memory[4]
                w_cnt -= 1
        res = max(res, cur)
    return res


def eager_execution_time(stage_result, cost, c_cost):
    """Also known as 'squeeze' in the paper."""
    num_types = len(cost)
    assert num_types == len(stage_result[0])
    num_stages = len(stage_result)
    p = [[0 for _ in range(num_types)] for __ in range(num_stages)]
    total_elements = num_stages * sum([len(t) for t in stage_result[0]])
    end_time = {}
    stage_order = [[] for _ in range(num_stages)]
    inf = max([max([max(type) for type in stage]) for stage in stage_result]) + 1
    for _ in range(total_elements):
        next_time, next_stage, next_type, next_mb = min(
            [
                (
                    (
                        stage_result[t // num_types][t % num_types][
                            p[t // num_types][t % num_types]
                        ]
                        if p[t // num_types][t % num_types]
                        < len(stage_result[t // num_types][t % num_types])
                        else inf
                    ),
                    t // num_types,
                    t % num_types,
                    p[t // num_types][t % num_types],
                )
                for t in range(num_types * num_stages)
            ]
        )
        assert next_time != inf
        p[next_stage][next_type] += 1

        deps = 0
        if next_type in {0, 2}:
            if next_stage > 0:
                deps = max(deps, end_time[(next_stage - 1, next_type, next_mb)] + c_cost)
        if next_type in {1, 3}:
            if next_stage + 1 < num_stages:
                deps = max(deps, end_time[(next_stage + 1, next_type, next_mb)] + c_cost)
        if 4 > next_type > 0:
            deps = max(deps, end_time[(next_stage, next_type - 1, next_mb)])
        if next_mb > 0:
            deps = max(deps, end_time[(next_stage, next_type, next_mb - 1)])
        if stage_order[next_stage]:
            deps = max(deps, end_time[(next_stage, *stage_order[next_stage][-1])])
        deps += cost[next_type]
        end_time[(next_stage, next_type, next_mb)] = deps
        stage_order[next_stage].append((next_type, next_mb))

    node_time = []
    for stage, stage_content in enumerate(stage_result):
        node_time.append([])
        for type, type_content in enumerate(stage_content):
            node_time[-1].append([])
            for mb, _ in enumerate(type_content):
                node_time[-1][-1].append(end_time[(stage, type, mb)] - cost[type])

    return (
        max(
            [
                end_time[(s, num_types - 1, len(stage_result[s][num_types - 1]) - 1)]
                - end_time[(s, 0, 0)]
                + cost[0]
                for s in range(num_stages)
            ]
        ),
        node_time,
        stage_order,
    )


def reorder(stage_result, consider_w):
    num_types = 4
    if consider_w:
        stage_result = [put_w(schedule) for schedule in stage_result]
        num_types = 5
    assert num_types == len(stage_result[0])

    current_mem = max([mem_of_stage(s) for s in stage_result])
    num_stages = len(stage_result)

    p = [[0 for _ in range(num_types)] for __ in range(num_stages)]
    occupied = [["" for x in range(stage[-1][-1] + 1)] for stage in stage_result]
    total_elements = num_stages * sum([len(t) for t in stage_result[0]])

    phase = 0
    inf = max([max([max(type) for type in stage]) for stage in stage_result]) + 1
    names = "FfBbWw"
    for _ in range(total_elements):
        next_time, next_stage, next_type, next_mb = min(
            [
                (
                    (
                        stage_result[t // num_types][t % num_types][
                            p[t // num_types][t % num_types]
                        ]
                        if p[t // num_types][t % num_types]
                        < len(stage_result[t // num_types][t % num_types])
                        else inf
                    ),
                    t // num_types,
                    t % num_types,
                    p[t // num_types][t % num_types],
                )
                for t in range(num_types * num_stages)
            ]
        )
        assert next_time != inf

        p[next_stage][next_type] += 1

        if next_type == 3 and next_stage == 0 and phase == 0:
            phase += 1
        if phase == 1:
            if next_type == 0 and next_mb == len(stage_result[0][0]) - 1:
                phase += 1
            occupied[next_stage][stage_result[next_stage][next_type][next_mb]] = (
                f"{names[next_type]}{next_mb}"
            )
            continue
        if phase == 0 and not consider_w:
            occupied[next_stage][stage_result[next_stage][next_type][next_mb]] = (
                f"{names[next_type]}{next_mb}"
            )
            continue

        deps = -1
        if next_type in {0, 2}:
            if next_stage > 0:
                deps = max(deps, stage_result[next_stage - 1][next_type][next_mb])
        if next_type in {1, 3}:
            if next_stage + 1 < num_stages:
                deps = max(deps, stage_result[next_stage + 1][next_type][next_mb])
        if 4 > next_type > 0:
            deps = max(deps, stage_result[next_stage][next_type - 1][next_mb])
        if 4 == next_type:
            b_time = sorted(stage_result[next_stage][2] + stage_result[next_stage][3])[next_mb]
            deps = max(deps, b_time)
        if next_mb > 0:
            deps = max(deps, stage_result[next_stage][next_type][next_mb - 1])

        deps += 1
        assert deps <= next_time
        ok = False
        for possible_time in range(deps, next_time):
            if not occupied[next_stage][possible_time]:
                stage_result[next_stage][next_type][next_mb] = possible_time
                if mem_of_stage(stage_result[next_stage]) <= current_mem:
                    ok = True
                    break
        if not ok:
            stage_result[next_stage][next_type][next_mb] = next_time
        occupied[next_stage][stage_result[next_stage][next_type][next_mb]] = (
            f"{names[next_type]}{next_mb}"
        )

    if not consider_w:
        stage_result = [put_w(schedule) for schedule in stage_result]

    return eager_execution_time(stage_result, [1, 1, 1, 1, 1], 0)[1]


def schedule_from_pattern(schedule, nmb, cost, c_cost=0):
    """The ``do_reorder=True`` path, the one ``create_schedule`` takes."""
    stage_result = [[list(range(x, x + 6 * nmb, 6)) for x in stage] for stage in schedule]
    r1 = reorder(stage_result, consider_w=True)
    r1 = [schedule[:4] for schedule in r1]
    r2 = reorder(r1, consider_w=False)
    r2 = [schedule[:4] for schedule in r2]
    r2 = [put_w(schedule, split_w=True) for schedule in r2]
    return eager_execution_time(r2, cost, c_cost=c_cost)


PATTERNS = {"v_half": stable_pattern_v_half, "v_min": stable_pattern_v_min}


def authors_schedule(name, P, M, f=1, b=1, w=1):
    """(max per-rank span, per-rank orders as ppir action text, bubble rate) of the authors'
    ``name`` ("v_half" or "v_min") for P ranks and M microbatches, as ``create_schedule``
    computes them: cost list [f, f, b, b, w, w], bubble rate (span - (f+b+w)*2M) / span."""
    pattern = PATTERNS[name](P)
    span, _, stage_order = schedule_from_pattern(pattern, M, [f, f, b, b, w, w])
    names = {0: ("F", 0), 1: ("F", 1), 2: ("I", 1), 3: ("I", 0), 4: ("W", 1), 5: ("W", 0)}
    orders = []
    for rank, row in enumerate(stage_order):
        stage = (rank, 2 * P - 1 - rank)  # the V: chunk 0 is stage r, chunk 1 is 2P-1-r
        orders.append([f"{stage[names[t][1]]}{names[t][0]}{mb}" for t, mb in row])
    return span, orders, (span - (f + b + w) * 2 * M) / span
