#!/usr/bin/env python3
# Applies a named experimental variant to a copied source tree (session 3 A/B). Usage: xform.py ROOT VARIANT...
import sys, re
root = sys.argv[1]
def edit(path, old, new, count=1):
    p = f"{root}/{path}"; s = open(p).read()
    assert s.count(old) >= 1, (path, old[:60])
    s = s.replace(old, new) if count == 0 else s.replace(old, new, count)
    open(p, 'w').write(s)
def blockn(n):
    p = f"{root}/src/sm90/tile_config.hpp"; s = open(p).read()
    i = s.index('struct TileConfig<128, 128>'); j = s.index('kBlockN = 128;', i)
    open(p, 'w').write(s[:j] + f'kBlockN = {n};' + s[j + 14:])
for v in sys.argv[2:]:
    if re.fullmatch(r'n\d+', v):
        blockn(int(v[1:]))
    elif v == 'fa3ord':
        # rescale O between the QK issue and the PV issue (under QK's tensor time), not after PV's wait
        edit('src/sm90/mainloop.cuh', '''          issue_qk(s, smem.k[k_state.index]);
          ptx::wgmma_commit();
          issue_pv(o, p, smem.v[v_state.index]);''', '''          issue_qk(s, smem.k[k_state.index]);
          ptx::wgmma_commit();
          rescale_o(o, factor);
          ptx::wgmma_fence();
          issue_pv(o, p, smem.v[v_state.index]);''')
        edit('src/sm90/mainloop.cuh', '''          v_state.advance();
          rescale_o(o, factor);
          convert_p(s, p);''', '''          v_state.advance();
          convert_p(s, p);''')
        edit('src/sm90/mainloop.cuh', '''        // Drain: the last block's O += P V.
        pv_to_completion(o, p);''', '''        // Drain: the last block's O += P V.
        if (num_blocks > 1) rescale_o(o, factor);
        pv_to_completion(o, p);''')
    elif v == 'nosm':
        # DIAGNOSTIC (wrong results): no mask/softmax in the overlap loop
        edit('src/sm90/mainloop.cuh', '''          prepare_scores(s, Scheduler::mask(params, tile), n, wg_row_first);
          softmax.update<kAccS>(s, params.scale_log2, factor);
          pin_before_wait(softmax.row_sum[0], softmax.row_sum[1]);''', '''          factor[0] = factor[1] = 1.0f;
          pin_before_wait(s[0], s[kAccS - 1]);''')
    elif v == 'noload':
        # DIAGNOSTIC (wrong results): after the first kStages K/V blocks of the CTA, no TMA: plain arrivals
        edit('src/sm90/mainloop.cuh', '''    uint32_t tail_phase = 0;  // kVarlen: v_tail's parity''', '''    uint32_t tail_phase = 0;  // kVarlen: v_tail's parity
    int diag_blocks = 0;''')
        edit('src/sm90/mainloop.cuh', '''        if (leader) {
          ptx::mbarrier_arrive_expect_tx(&smem.k_full[k_state.index], Traits::kKBytes);''', '''        if (leader && ++diag_blocks > Traits::kStages) {
          ptx::mbarrier_arrive(&smem.k_full[k_state.index]);
        } else if (leader) {
          ptx::mbarrier_arrive_expect_tx(&smem.k_full[k_state.index], Traits::kKBytes);''')
        edit('src/sm90/mainloop.cuh', '''        } else if (leader) {
          ptx::mbarrier_arrive_expect_tx(&smem.v_full[v_state.index], Traits::kVBytes);''', '''        } else if (leader && diag_blocks > Traits::kStages) {
          ptx::mbarrier_arrive(&smem.v_full[v_state.index]);
        } else if (leader) {
          ptx::mbarrier_arrive_expect_tx(&smem.v_full[v_state.index], Traits::kVBytes);''')
    elif v == 'tree':
        # softmax: row max and row sum over 4 independent partial chains (shorter dependency chains)
        edit('src/sm90/softmax.cuh', '''    float block_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < kAcc; ++i) block_max[acc_row(i)] = fmaxf(block_max[acc_row(i)], s[i]);''', '''    float part_max[2][4];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int j = 0; j < 4; ++j) part_max[r][j] = -INFINITY;
#pragma unroll
    for (int i = 0; i < kAcc; ++i) part_max[acc_row(i)][(i >> 2) & 3] = fmaxf(part_max[acc_row(i)][(i >> 2) & 3], s[i]);
    float block_max[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) block_max[r] = fmaxf(fmaxf(part_max[r][0], part_max[r][1]), fmaxf(part_max[r][2], part_max[r][3]));''')
        edit('src/sm90/softmax.cuh', '''#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      s[i] = ptx::exp2_approx(fmaf(s[i], scale_log2, -max_scaled[acc_row(i)]));
      row_sum[acc_row(i)] += s[i];
    }''', '''    float part_sum[2][4] = {};
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      s[i] = ptx::exp2_approx(fmaf(s[i], scale_log2, -max_scaled[acc_row(i)]));
      part_sum[acc_row(i)][(i >> 2) & 3] += s[i];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) row_sum[r] += (part_sum[r][0] + part_sum[r][1]) + (part_sum[r][2] + part_sum[r][3]);''')
    elif v == 'dep1':
        # single predicated wait (no complementary one)
        edit('src/ptx/wgmma.hpp', '''      "@!p wgmma.wait_group.sync.aligned %2;\\n}\\n" ::''', '''      "}\\n" ::''')
    elif v == 'nodep':
        edit('src/sm90/mainloop.cuh', '''ptx::wgmma_wait_after<0>(softmax.row_sum[0], softmax.row_sum[1]);''', '''ptx::wgmma_wait<0>();''')
    elif v == 'nopin':
        edit('src/sm90/mainloop.cuh', '''          pin_before_wait(softmax.row_sum[0], softmax.row_sum[1]);
''', '')
    elif v == 'pinall':
        edit('src/sm90/mainloop.cuh', '''    if (lane == 0) {
      const uint32_t slot''', '''    {
      const uint32_t slot''')
    elif v == 'qrs':
        # DIAGNOSTIC (wrong results): S = Q K^T with A from 32 registers per thread (RS, K-major B):
        # the smem-bandwidth and register cost of holding Q in registers
        inc = open(f"{root}/src/ptx/wgmma_shapes.inc").read()
        i = inc.index('template <> struct WgmmaRS<128, WgmmaType::kHalf> {'); j = inc.index('};', i) + 2
        blk = inc[i:j].replace('template <> struct WgmmaRS<128, WgmmaType::kHalf> {', 'struct WgmmaRSK128 {').replace('p, 1, 1, 1;', 'p, 1, 1, 0;')
        open(f"{root}/src/ptx/wgmma_shapes.inc", 'a').write('\n' + blk + '\n')
        edit('src/sm90/mainloop.cuh', '''  ptx::PipelineState<Traits::kStages> k_state, v_state;
  uint32_t q_phase = 0;''', '''  ptx::PipelineState<Traits::kStages> k_state, v_state;
  uint32_t q_phase = 0;
  uint32_t qfrag[Traits::kDqk / 4];''')
        edit('src/sm90/mainloop.cuh', '''      ptx::WgmmaSS<kBlockN, Traits::kWgmmaType>::run(s, ptx::desc_advance(desc_q, chunk * kBlockM * kRowBytes + within),
                                                     ptx::desc_advance(desc_k, chunk * kBlockN * kRowBytes + within),
                                                     kk > 0 ? 1 : 0);''', '''      ptx::WgmmaRSK128::run(s, qfrag + 4 * kk, ptx::desc_advance(desc_k, chunk * kBlockN * kRowBytes + within), kk > 0 ? 1 : 0);''')
        edit('src/sm90/mainloop.cuh', '''  __device__ void issue_qk(float* s, const uint16_t* k_tile) const {''', '''  __device__ void issue_qk(float* s, const uint16_t* k_tile) {''')
        edit('src/sm90/mainloop.cuh', '''      ptx::mbarrier_wait(&smem.q_full, q_phase);
''', '''      ptx::mbarrier_wait(&smem.q_full, q_phase);
#pragma unroll
      for (int i = 0; i < Traits::kDqk / 4; ++i) qfrag[i] = reinterpret_cast<const uint32_t*>(smem.q)[(warpgroup * 128 + warp * 32 + lane) + 256 * i];
''')
    elif re.fullmatch(r'poly\d', v):
        edit('src/sm90/softmax.cuh', 'inline constexpr int kExp2FmaEighths = 0;', f'inline constexpr int kExp2FmaEighths = {v[4]};')
    elif re.fullmatch(r'wg3n\d+s\d', v):
        # d128 with three consumer warpgroups (kBlockM 192, no ping-pong), kBlockN n, s stages
        n, st = v[4:].split('s')
        p = f"{root}/src/sm90/tile_config.hpp"; t = open(p).read()
        i = t.index('struct TileConfig<128, 128> {'); j = t.index('};', i)
        body = t[i:j]
        for a, b in [('kConsumerWarpgroups = 2;', 'kConsumerWarpgroups = 3;'), ('kBlockN = 128;', f'kBlockN = {n};'),
                     ('kStages = 2;', f'kStages = {st};'), ('kAltBlockN = 176;', 'kAltBlockN = 0;'),
                     ('kConsumerRegs = 240;', 'kConsumerRegs = 160;')]:
            assert a in body, a
            body = body.replace(a, b)
        open(p, 'w').write(t[:i] + body + t[j:])
    elif re.fullmatch(r'd64wg\dn\d+s\dr\d+', v):
        # d64 with w consumer warpgroups, kBlockN n, s stages, r consumer registers
        m = re.fullmatch(r'd64wg(\d)n(\d+)s(\d)r(\d+)', v); w, n, st, r = m.groups()
        p = f"{root}/src/sm90/tile_config.hpp"; t = open(p).read()
        i = t.index('struct TileConfig<64, 64> {'); j = t.index('};', i)
        body = t[i:j]
        for a, b in [('kConsumerWarpgroups = 3;', f'kConsumerWarpgroups = {w};'), ('kBlockN = 96;', f'kBlockN = {n};'),
                     ('kStages = 3;', f'kStages = {st};'), ('kAltBlockN = 128;', 'kAltBlockN = 0;'),
                     ('kConsumerRegs = 160;', f'kConsumerRegs = {r};')]:
            assert a in body, a
            body = body.replace(a, b)
        open(p, 'w').write(t[:i] + body + t[j:])
    elif v == 'base':
        pass
    else:
        raise SystemExit('unknown variant ' + v)
