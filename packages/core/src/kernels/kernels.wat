;; Per-round products over data held in this module's memory (see wasm-kernels.ts): a CSR
;; matrix's, and a panel of single-precision columns'. Every function does exactly the
;; operations of its TypeScript twin, in the same order, so the results are the same to the
;; bit: IEEE double multiply then add, never fused (a single is widened to a double exactly).
;; Arguments are byte offsets into memory: indptr and indices (i32), values (f64), panels
;; (f32), vectors (f64). The encoded module is in wasm-kernels-bytes.ts (npm run wasm).
;; The memory is shared (a SharedArrayBuffer), so the x-update's threads (DenseTeam) form a
;; factor straight into it; nothing here is atomic, and no two threads use it at once.
(module
  (import "env" "memory" (memory 1 32768 shared))

  ;; out = A x  (csrMatVec): out[i] = sum over row i of values[k] * x[indices[k]]
  (func (export "matVec")
    (param $rows i32) (param $indptr i32) (param $indices i32) (param $values i32) (param $x i32) (param $out i32)
    (local $i i32) (local $k i32) (local $e i32) (local $acc f64)
    (local.set $k (i32.load (local.get $indptr)))
    (block $done
      (loop $row
        (br_if $done (i32.ge_u (local.get $i) (local.get $rows)))
        (local.set $e (i32.load (i32.add (local.get $indptr) (i32.shl (i32.add (local.get $i) (i32.const 1)) (i32.const 2)))))
        (local.set $acc (f64.const 0))
        (block $end
          (loop $entry
            (br_if $end (i32.ge_s (local.get $k) (local.get $e)))
            (local.set $acc
              (f64.add (local.get $acc)
                (f64.mul
                  (f64.load (i32.add (local.get $values) (i32.shl (local.get $k) (i32.const 3))))
                  (f64.load (i32.add (local.get $x)
                    (i32.shl (i32.load (i32.add (local.get $indices) (i32.shl (local.get $k) (i32.const 2)))) (i32.const 3)))))))
            (local.set $k (i32.add (local.get $k) (i32.const 1)))
            (br $entry)))
        (f64.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 3))) (local.get $acc))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $row))))

  ;; out[0..cols) = 0
  (func $zero (param $out i32) (param $cols i32)
    (memory.fill (local.get $out) (i32.const 0) (i32.shl (local.get $cols) (i32.const 3))))

  ;; out[indices[k]] += values[k] * a for the entries k in [k, e) of one row
  (func $scatter (param $indices i32) (param $values i32) (param $out i32) (param $k i32) (param $e i32) (param $a f64)
    (local $p i32)
    (block $end
      (loop $entry
        (br_if $end (i32.ge_s (local.get $k) (local.get $e)))
        (local.set $p (i32.add (local.get $out)
          (i32.shl (i32.load (i32.add (local.get $indices) (i32.shl (local.get $k) (i32.const 2)))) (i32.const 3))))
        (f64.store (local.get $p)
          (f64.add (f64.load (local.get $p))
            (f64.mul (f64.load (i32.add (local.get $values) (i32.shl (local.get $k) (i32.const 3)))) (local.get $a))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $entry))))

  ;; out = A^T w  (csrMatTVec): rows whose w[i] is zero are skipped
  (func (export "matTVec")
    (param $rows i32) (param $cols i32) (param $indptr i32) (param $indices i32) (param $values i32) (param $w i32) (param $out i32)
    (local $i i32) (local $s i32) (local $e i32) (local $wi f64)
    (call $zero (local.get $out) (local.get $cols))
    (local.set $e (i32.load (local.get $indptr)))
    (block $done
      (loop $row
        (br_if $done (i32.ge_u (local.get $i) (local.get $rows)))
        (local.set $s (local.get $e))
        (local.set $e (i32.load (i32.add (local.get $indptr) (i32.shl (i32.add (local.get $i) (i32.const 1)) (i32.const 2)))))
        (local.set $wi (f64.load (i32.add (local.get $w) (i32.shl (local.get $i) (i32.const 3)))))
        (if (f64.ne (local.get $wi) (f64.const 0))
          (then (call $scatter (local.get $indices) (local.get $values) (local.get $out) (local.get $s) (local.get $e) (local.get $wi))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $row))))

  ;; out = A^T (a - b)  (csrMatTVec of the difference, formed row by row: a - b is not stored)
  (func (export "matTVecDiff")
    (param $rows i32) (param $cols i32) (param $indptr i32) (param $indices i32) (param $values i32) (param $a i32) (param $b i32) (param $out i32)
    (local $i i32) (local $s i32) (local $e i32) (local $at i32) (local $wi f64)
    (call $zero (local.get $out) (local.get $cols))
    (local.set $e (i32.load (local.get $indptr)))
    (block $done
      (loop $row
        (br_if $done (i32.ge_u (local.get $i) (local.get $rows)))
        (local.set $s (local.get $e))
        (local.set $e (i32.load (i32.add (local.get $indptr) (i32.shl (i32.add (local.get $i) (i32.const 1)) (i32.const 2)))))
        (local.set $at (i32.shl (local.get $i) (i32.const 3)))
        (local.set $wi (f64.sub (f64.load (i32.add (local.get $a) (local.get $at))) (f64.load (i32.add (local.get $b) (local.get $at)))))
        (if (f64.ne (local.get $wi) (f64.const 0))
          (then (call $scatter (local.get $indices) (local.get $values) (local.get $out) (local.get $s) (local.get $e) (local.get $wi))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $row))))

  ;; out = A^T A v  (csrGramVec): each row's dot product with v, then the row added back scaled
  ;; by it (skipped when it is zero)
  (func (export "gramVec")
    (param $rows i32) (param $cols i32) (param $indptr i32) (param $indices i32) (param $values i32) (param $v i32) (param $out i32)
    (local $i i32) (local $k i32) (local $s i32) (local $e i32) (local $acc f64)
    (call $zero (local.get $out) (local.get $cols))
    (local.set $k (i32.load (local.get $indptr)))
    (block $done
      (loop $row
        (br_if $done (i32.ge_u (local.get $i) (local.get $rows)))
        (local.set $s (local.get $k))
        (local.set $e (i32.load (i32.add (local.get $indptr) (i32.shl (i32.add (local.get $i) (i32.const 1)) (i32.const 2)))))
        (local.set $acc (f64.const 0))
        (block $end
          (loop $entry
            (br_if $end (i32.ge_s (local.get $k) (local.get $e)))
            (local.set $acc
              (f64.add (local.get $acc)
                (f64.mul
                  (f64.load (i32.add (local.get $values) (i32.shl (local.get $k) (i32.const 3))))
                  (f64.load (i32.add (local.get $v)
                    (i32.shl (i32.load (i32.add (local.get $indices) (i32.shl (local.get $k) (i32.const 2)))) (i32.const 3)))))))
            (local.set $k (i32.add (local.get $k) (i32.const 1)))
            (br $entry)))
        (if (f64.ne (local.get $acc) (f64.const 0))
          (then (call $scatter (local.get $indices) (local.get $values) (local.get $out) (local.get $s) (local.get $e) (local.get $acc))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $row))))

  ;; coef[c] = sum over j of U[c len + j] r[j], for the `cols` columns of the panel U (f32, len each)
  (func (export "panelDots") (param $cols i32) (param $len i32) (param $u i32) (param $r i32) (param $coef i32)
    (local $c i32) (local $j i32) (local $acc f64) (local $col i32)
    (block $done
      (loop $column
        (br_if $done (i32.ge_u (local.get $c) (local.get $cols)))
        (local.set $col (i32.add (local.get $u) (i32.shl (i32.mul (local.get $c) (local.get $len)) (i32.const 2))))
        (local.set $acc (f64.const 0))
        (local.set $j (i32.const 0))
        (block $end
          (loop $entry
            (br_if $end (i32.ge_u (local.get $j) (local.get $len)))
            (local.set $acc
              (f64.add (local.get $acc)
                (f64.mul
                  (f64.promote_f32 (f32.load (i32.add (local.get $col) (i32.shl (local.get $j) (i32.const 2)))))
                  (f64.load (i32.add (local.get $r) (i32.shl (local.get $j) (i32.const 3)))))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $entry)))
        (f64.store (i32.add (local.get $coef) (i32.shl (local.get $c) (i32.const 3))) (local.get $acc))
        (local.set $c (i32.add (local.get $c) (i32.const 1)))
        (br $column))))

  ;; z[j] += coef[c] U[c len + j], column after column
  (func (export "panelAdd") (param $cols i32) (param $len i32) (param $u i32) (param $coef i32) (param $z i32)
    (local $c i32) (local $j i32) (local $t f64) (local $col i32) (local $p i32)
    (block $done
      (loop $column
        (br_if $done (i32.ge_u (local.get $c) (local.get $cols)))
        (local.set $col (i32.add (local.get $u) (i32.shl (i32.mul (local.get $c) (local.get $len)) (i32.const 2))))
        (local.set $t (f64.load (i32.add (local.get $coef) (i32.shl (local.get $c) (i32.const 3)))))
        (local.set $j (i32.const 0))
        (block $end
          (loop $entry
            (br_if $end (i32.ge_u (local.get $j) (local.get $len)))
            (local.set $p (i32.add (local.get $z) (i32.shl (local.get $j) (i32.const 3))))
            (f64.store (local.get $p)
              (f64.add (f64.load (local.get $p))
                (f64.mul (local.get $t)
                  (f64.promote_f32 (f32.load (i32.add (local.get $col) (i32.shl (local.get $j) (i32.const 2))))))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $entry)))
        (local.set $c (i32.add (local.get $c) (i32.const 1)))
        (br $column))))

  ;; L y = b in place (forwardSubstitute): L lower triangular, packed (row i starts at entry
  ;; i (i + 1) / 2); each row's dot product in two interleaved sums, as the TypeScript does
  (func (export "forward") (param $n i32) (param $l i32) (param $b i32)
    (local $i i32) (local $k i32) (local $row i32) (local $s0 f64) (local $s1 f64) (local $p i32) (local $q i32)
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $row (i32.add (local.get $l) (i32.shl (i32.shr_u (i32.mul (local.get $i) (i32.add (local.get $i) (i32.const 1))) (i32.const 1)) (i32.const 3))))
        (local.set $s0 (f64.const 0))
        (local.set $s1 (f64.const 0))
        (local.set $k (i32.const 0))
        (block $end
          (loop $pairs
            (br_if $end (i32.ge_u (i32.add (local.get $k) (i32.const 1)) (local.get $i)))
            (local.set $p (i32.add (local.get $row) (i32.shl (local.get $k) (i32.const 3))))
            (local.set $q (i32.add (local.get $b) (i32.shl (local.get $k) (i32.const 3))))
            (local.set $s0 (f64.add (local.get $s0) (f64.mul (f64.load (local.get $p)) (f64.load (local.get $q)))))
            (local.set $s1 (f64.add (local.get $s1) (f64.mul (f64.load offset=8 (local.get $p)) (f64.load offset=8 (local.get $q)))))
            (local.set $k (i32.add (local.get $k) (i32.const 2)))
            (br $pairs)))
        (if (i32.lt_u (local.get $k) (local.get $i))
          (then
            (local.set $s0 (f64.add (local.get $s0)
              (f64.mul (f64.load (i32.add (local.get $row) (i32.shl (local.get $k) (i32.const 3))))
                       (f64.load (i32.add (local.get $b) (i32.shl (local.get $k) (i32.const 3)))))))))
        (local.set $q (i32.add (local.get $b) (i32.shl (local.get $i) (i32.const 3))))
        (f64.store (local.get $q)
          (f64.div
            (f64.sub (f64.sub (f64.load (local.get $q)) (local.get $s0)) (local.get $s1))
            (f64.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 3))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows))))

  ;; L^T x = y in place (backSubstitute): by rows of L from the last, each solved entry
  ;; subtracted from those before it
  (func (export "back") (param $n i32) (param $l i32) (param $b i32)
    (local $i i32) (local $k i32) (local $row i32) (local $xi f64) (local $q i32) (local $p i32)
    (local.set $i (local.get $n))
    (block $done
      (loop $rows
        (br_if $done (i32.eqz (local.get $i)))
        (local.set $i (i32.sub (local.get $i) (i32.const 1)))
        (local.set $row (i32.add (local.get $l) (i32.shl (i32.shr_u (i32.mul (local.get $i) (i32.add (local.get $i) (i32.const 1))) (i32.const 1)) (i32.const 3))))
        (local.set $q (i32.add (local.get $b) (i32.shl (local.get $i) (i32.const 3))))
        (local.set $xi (f64.div (f64.load (local.get $q)) (f64.load (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 3))))))
        (f64.store (local.get $q) (local.get $xi))
        (local.set $k (i32.const 0))
        (block $end
          (loop $entries
            (br_if $end (i32.ge_u (local.get $k) (local.get $i)))
            (local.set $q (i32.add (local.get $b) (i32.shl (local.get $k) (i32.const 3))))
            (local.set $p (i32.add (local.get $row) (i32.shl (local.get $k) (i32.const 3))))
            (f64.store (local.get $q) (f64.sub (f64.load (local.get $q)) (f64.mul (f64.load (local.get $p)) (local.get $xi))))
            (local.set $k (i32.add (local.get $k) (i32.const 1)))
            (br $entries)))
        (br $rows))))

  ;; Anderson acceleration's passes (the coordinator's anderson-kernels.ts) over elements
  ;; [from, to): two at a time (f64x2), the even element in lane 0 and the odd one in lane 1.
  ;; The TypeScript twins keep a sum per lane the same way and add lane 0's to lane 1's at the
  ;; end; a last odd element goes to lane 0's sum. Doubles are f64; the differences are f32,
  ;; rounded to nearest when stored and widened exactly when read.

  ;; out[0] = ||f - point||^2
  (func (export "aaNorm") (param $from i32) (param $to i32) (param $f i32) (param $point i32) (param $out i32)
    (local $i i32) (local $end i32) (local $g v128) (local $n v128) (local $s f64) (local $t f64)
    (local.set $i (local.get $from))
    (local.set $end (i32.sub (local.get $to) (i32.and (i32.sub (local.get $to) (local.get $from)) (i32.const 1))))
    (block $done
      (loop $pair
        (br_if $done (i32.ge_s (local.get $i) (local.get $end)))
        (local.set $g (f64x2.sub
          (v128.load (i32.add (local.get $f) (i32.shl (local.get $i) (i32.const 3))))
          (v128.load (i32.add (local.get $point) (i32.shl (local.get $i) (i32.const 3))))))
        (local.set $n (f64x2.add (local.get $n) (f64x2.mul (local.get $g) (local.get $g))))
        (local.set $i (i32.add (local.get $i) (i32.const 2)))
        (br $pair)))
    (local.set $s (f64x2.extract_lane 0 (local.get $n)))
    (if (i32.lt_s (local.get $end) (local.get $to))
      (then
        (local.set $t (f64.sub
          (f64.load (i32.add (local.get $f) (i32.shl (local.get $end) (i32.const 3))))
          (f64.load (i32.add (local.get $point) (i32.shl (local.get $end) (i32.const 3))))))
        (local.set $s (f64.add (local.get $s) (f64.mul (local.get $t) (local.get $t))))))
    (f64.store (local.get $out) (f64.add (local.get $s) (f64x2.extract_lane 1 (local.get $n)))))

  ;; g = f - point; dF = f - prevF and dG = g - prevG (stored as f32); out[0] = ||g||^2,
  ;; out[1] = dG . g, out[2] = dG . dG (dG as stored)
  (func (export "aaFirst")
    (param $from i32) (param $to i32) (param $f i32) (param $point i32) (param $prevF i32) (param $prevG i32) (param $dF i32) (param $dG i32) (param $out i32)
    (local $i i32) (local $end i32) (local $a64 i32) (local $a32 i32)
    (local $fv v128) (local $g v128) (local $d v128) (local $n v128) (local $r v128) (local $q v128)
    (local $fs f64) (local $gs f64) (local $ds f64) (local $n0 f64) (local $r0 f64) (local $q0 f64)
    (local.set $i (local.get $from))
    (local.set $end (i32.sub (local.get $to) (i32.and (i32.sub (local.get $to) (local.get $from)) (i32.const 1))))
    (block $done
      (loop $pair
        (br_if $done (i32.ge_s (local.get $i) (local.get $end)))
        (local.set $a64 (i32.shl (local.get $i) (i32.const 3)))
        (local.set $a32 (i32.shl (local.get $i) (i32.const 2)))
        (local.set $fv (v128.load (i32.add (local.get $f) (local.get $a64))))
        (local.set $g (f64x2.sub (local.get $fv) (v128.load (i32.add (local.get $point) (local.get $a64)))))
        (local.set $n (f64x2.add (local.get $n) (f64x2.mul (local.get $g) (local.get $g))))
        (v128.store64_lane 0 (i32.add (local.get $dF) (local.get $a32))
          (f32x4.demote_f64x2_zero (f64x2.sub (local.get $fv) (v128.load (i32.add (local.get $prevF) (local.get $a64))))))
        (local.set $d (f32x4.demote_f64x2_zero (f64x2.sub (local.get $g) (v128.load (i32.add (local.get $prevG) (local.get $a64))))))
        (v128.store64_lane 0 (i32.add (local.get $dG) (local.get $a32)) (local.get $d))
        (local.set $d (f64x2.promote_low_f32x4 (local.get $d)))
        (local.set $r (f64x2.add (local.get $r) (f64x2.mul (local.get $d) (local.get $g))))
        (local.set $q (f64x2.add (local.get $q) (f64x2.mul (local.get $d) (local.get $d))))
        (local.set $i (i32.add (local.get $i) (i32.const 2)))
        (br $pair)))
    (local.set $n0 (f64x2.extract_lane 0 (local.get $n)))
    (local.set $r0 (f64x2.extract_lane 0 (local.get $r)))
    (local.set $q0 (f64x2.extract_lane 0 (local.get $q)))
    (if (i32.lt_s (local.get $end) (local.get $to))
      (then
        (local.set $a64 (i32.shl (local.get $end) (i32.const 3)))
        (local.set $a32 (i32.shl (local.get $end) (i32.const 2)))
        (local.set $fs (f64.load (i32.add (local.get $f) (local.get $a64))))
        (local.set $gs (f64.sub (local.get $fs) (f64.load (i32.add (local.get $point) (local.get $a64)))))
        (local.set $n0 (f64.add (local.get $n0) (f64.mul (local.get $gs) (local.get $gs))))
        (f32.store (i32.add (local.get $dF) (local.get $a32))
          (f32.demote_f64 (f64.sub (local.get $fs) (f64.load (i32.add (local.get $prevF) (local.get $a64))))))
        (local.set $ds (f64.promote_f32 (f32.demote_f64 (f64.sub (local.get $gs) (f64.load (i32.add (local.get $prevG) (local.get $a64)))))))
        (f32.store (i32.add (local.get $dG) (local.get $a32)) (f32.demote_f64 (local.get $ds)))
        (local.set $r0 (f64.add (local.get $r0) (f64.mul (local.get $ds) (local.get $gs))))
        (local.set $q0 (f64.add (local.get $q0) (f64.mul (local.get $ds) (local.get $ds))))))
    (f64.store (local.get $out) (f64.add (local.get $n0) (f64x2.extract_lane 1 (local.get $n))))
    (f64.store offset=8 (local.get $out) (f64.add (local.get $r0) (f64x2.extract_lane 1 (local.get $r))))
    (f64.store offset=16 (local.get $out) (f64.add (local.get $q0) (f64x2.extract_lane 1 (local.get $q)))))

  ;; out[0] += a . b and out[1] += a . c (all f32)
  (func (export "aaDots2") (param $from i32) (param $to i32) (param $a i32) (param $b i32) (param $c i32) (param $out i32)
    (local $i i32) (local $end i32) (local $a32 i32) (local $x v128) (local $sb v128) (local $sc v128) (local $xs f64) (local $b0 f64) (local $c0 f64)
    (local.set $i (local.get $from))
    (local.set $end (i32.sub (local.get $to) (i32.and (i32.sub (local.get $to) (local.get $from)) (i32.const 1))))
    (block $done
      (loop $pair
        (br_if $done (i32.ge_s (local.get $i) (local.get $end)))
        (local.set $a32 (i32.shl (local.get $i) (i32.const 2)))
        (local.set $x (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $a) (local.get $a32)))))
        (local.set $sb (f64x2.add (local.get $sb) (f64x2.mul (local.get $x) (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $b) (local.get $a32)))))))
        (local.set $sc (f64x2.add (local.get $sc) (f64x2.mul (local.get $x) (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $c) (local.get $a32)))))))
        (local.set $i (i32.add (local.get $i) (i32.const 2)))
        (br $pair)))
    (local.set $b0 (f64x2.extract_lane 0 (local.get $sb)))
    (local.set $c0 (f64x2.extract_lane 0 (local.get $sc)))
    (if (i32.lt_s (local.get $end) (local.get $to))
      (then
        (local.set $a32 (i32.shl (local.get $end) (i32.const 2)))
        (local.set $xs (f64.promote_f32 (f32.load (i32.add (local.get $a) (local.get $a32)))))
        (local.set $b0 (f64.add (local.get $b0) (f64.mul (local.get $xs) (f64.promote_f32 (f32.load (i32.add (local.get $b) (local.get $a32)))))))
        (local.set $c0 (f64.add (local.get $c0) (f64.mul (local.get $xs) (f64.promote_f32 (f32.load (i32.add (local.get $c) (local.get $a32)))))))))
    (f64.store (local.get $out) (f64.add (f64.load (local.get $out)) (f64.add (local.get $b0) (f64x2.extract_lane 1 (local.get $sb)))))
    (f64.store offset=8 (local.get $out) (f64.add (f64.load offset=8 (local.get $out)) (f64.add (local.get $c0) (f64x2.extract_lane 1 (local.get $sc))))))

  ;; out[0] += a . b (f32), four elements at a time: s0 + s1 + (s2 + s3), the rest into s0
  (func (export "aaDot1") (param $from i32) (param $to i32) (param $a i32) (param $b i32) (param $out i32)
    (local $i i32) (local $a32 i32) (local $s01 v128) (local $s23 v128) (local $s0 f64)
    (local.set $i (local.get $from))
    (block $done
      (loop $quad
        (br_if $done (i32.ge_s (i32.add (local.get $i) (i32.const 3)) (local.get $to)))
        (local.set $a32 (i32.shl (local.get $i) (i32.const 2)))
        (local.set $s01 (f64x2.add (local.get $s01)
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $a) (local.get $a32)))) (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $b) (local.get $a32)))))))
        (local.set $s23 (f64x2.add (local.get $s23)
          (f64x2.mul (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $a) (i32.add (local.get $a32) (i32.const 8))))) (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $b) (i32.add (local.get $a32) (i32.const 8))))))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $quad)))
    (local.set $s0 (f64x2.extract_lane 0 (local.get $s01)))
    (block $end
      (loop $rest
        (br_if $end (i32.ge_s (local.get $i) (local.get $to)))
        (local.set $a32 (i32.shl (local.get $i) (i32.const 2)))
        (local.set $s0 (f64.add (local.get $s0)
          (f64.mul (f64.promote_f32 (f32.load (i32.add (local.get $a) (local.get $a32)))) (f64.promote_f32 (f32.load (i32.add (local.get $b) (local.get $a32)))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rest)))
    (f64.store (local.get $out) (f64.add (f64.load (local.get $out))
      (f64.add (f64.add (local.get $s0) (f64x2.extract_lane 1 (local.get $s01)))
        (f64.add (f64x2.extract_lane 0 (local.get $s23)) (f64x2.extract_lane 1 (local.get $s23)))))))

  ;; prevG = f - point, prevF = f, point = f - (ga a + gb b) (a and b f32)
  (func (export "aaNextFirst")
    (param $from i32) (param $to i32) (param $point i32) (param $prevF i32) (param $prevG i32) (param $f i32) (param $a i32) (param $b i32) (param $ga f64) (param $gb f64)
    (local $i i32) (local $end i32) (local $a64 i32) (local $a32 i32) (local $fv v128) (local $gav v128) (local $gbv v128) (local $fs f64)
    (local.set $gav (f64x2.splat (local.get $ga)))
    (local.set $gbv (f64x2.splat (local.get $gb)))
    (local.set $i (local.get $from))
    (local.set $end (i32.sub (local.get $to) (i32.and (i32.sub (local.get $to) (local.get $from)) (i32.const 1))))
    (block $done
      (loop $pair
        (br_if $done (i32.ge_s (local.get $i) (local.get $end)))
        (local.set $a64 (i32.shl (local.get $i) (i32.const 3)))
        (local.set $a32 (i32.shl (local.get $i) (i32.const 2)))
        (local.set $fv (v128.load (i32.add (local.get $f) (local.get $a64))))
        (v128.store (i32.add (local.get $prevG) (local.get $a64)) (f64x2.sub (local.get $fv) (v128.load (i32.add (local.get $point) (local.get $a64)))))
        (v128.store (i32.add (local.get $prevF) (local.get $a64)) (local.get $fv))
        (v128.store (i32.add (local.get $point) (local.get $a64))
          (f64x2.sub (local.get $fv)
            (f64x2.add
              (f64x2.mul (local.get $gav) (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $a) (local.get $a32)))))
              (f64x2.mul (local.get $gbv) (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $b) (local.get $a32))))))))
        (local.set $i (i32.add (local.get $i) (i32.const 2)))
        (br $pair)))
    (if (i32.lt_s (local.get $end) (local.get $to))
      (then
        (local.set $a64 (i32.shl (local.get $end) (i32.const 3)))
        (local.set $a32 (i32.shl (local.get $end) (i32.const 2)))
        (local.set $fs (f64.load (i32.add (local.get $f) (local.get $a64))))
        (f64.store (i32.add (local.get $prevG) (local.get $a64)) (f64.sub (local.get $fs) (f64.load (i32.add (local.get $point) (local.get $a64)))))
        (f64.store (i32.add (local.get $prevF) (local.get $a64)) (local.get $fs))
        (f64.store (i32.add (local.get $point) (local.get $a64))
          (f64.sub (local.get $fs)
            (f64.add
              (f64.mul (local.get $ga) (f64.promote_f32 (f32.load (i32.add (local.get $a) (local.get $a32)))))
              (f64.mul (local.get $gb) (f64.promote_f32 (f32.load (i32.add (local.get $b) (local.get $a32)))))))))))

  ;; point -= gc c + gd d (c and d f32)
  (func (export "aaNextPair")
    (param $from i32) (param $to i32) (param $point i32) (param $c i32) (param $d i32) (param $gc f64) (param $gd f64)
    (local $i i32) (local $end i32) (local $a64 i32) (local $a32 i32) (local $gcv v128) (local $gdv v128)
    (local.set $gcv (f64x2.splat (local.get $gc)))
    (local.set $gdv (f64x2.splat (local.get $gd)))
    (local.set $i (local.get $from))
    (local.set $end (i32.sub (local.get $to) (i32.and (i32.sub (local.get $to) (local.get $from)) (i32.const 1))))
    (block $done
      (loop $pair
        (br_if $done (i32.ge_s (local.get $i) (local.get $end)))
        (local.set $a64 (i32.add (local.get $point) (i32.shl (local.get $i) (i32.const 3))))
        (local.set $a32 (i32.shl (local.get $i) (i32.const 2)))
        (v128.store (local.get $a64)
          (f64x2.sub (v128.load (local.get $a64))
            (f64x2.add
              (f64x2.mul (local.get $gcv) (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $c) (local.get $a32)))))
              (f64x2.mul (local.get $gdv) (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $d) (local.get $a32))))))))
        (local.set $i (i32.add (local.get $i) (i32.const 2)))
        (br $pair)))
    (if (i32.lt_s (local.get $end) (local.get $to))
      (then
        (local.set $a64 (i32.add (local.get $point) (i32.shl (local.get $end) (i32.const 3))))
        (local.set $a32 (i32.shl (local.get $end) (i32.const 2)))
        (f64.store (local.get $a64)
          (f64.sub (f64.load (local.get $a64))
            (f64.add
              (f64.mul (local.get $gc) (f64.promote_f32 (f32.load (i32.add (local.get $c) (local.get $a32)))))
              (f64.mul (local.get $gd) (f64.promote_f32 (f32.load (i32.add (local.get $d) (local.get $a32)))))))))))

  ;; The coordinator step's logistic loss and its prox (the twins are expFlushed, log1pUnit,
  ;; log1pExpNeg and logisticProxInto in losses.ts): two samples at a time, a last odd one in
  ;; both lanes (only lane 0 stored). The exponential and the logarithm are fdlibm's
  ;; approximations, written out so that lanes and twins round alike.

  ;; e^x, two at a time, 0 below -708 and Infinity above 708 (expFlushed in losses.ts does the
  ;; same operations on one): x = k ln2 + r with k = round(x / ln2) and |r| <= ln2 / 2; e^r from
  ;; a rational approximation of r (its error below an ulp); 2^k put into the exponent's bits,
  ;; of x clamped to [-708, 708] so that k fits them.
  (func $exp2 (param $in v128) (result v128)
    (local $x v128) (local $kd v128) (local $k v128) (local $hi v128) (local $lo v128) (local $r v128) (local $t v128) (local $c v128)
    (local.set $x (f64x2.pmax (f64x2.pmin (local.get $in) (f64x2.splat (f64.const 708))) (f64x2.splat (f64.const -708))))
    (local.set $kd (f64x2.add (f64x2.mul (local.get $x) (f64x2.splat (f64.const 1.44269504088896338700e+00))) (f64x2.splat (f64.const 6755399441055744.0))))
    (local.set $k (f64x2.sub (local.get $kd) (f64x2.splat (f64.const 6755399441055744.0))))
    (local.set $hi (f64x2.sub (local.get $x) (f64x2.mul (local.get $k) (f64x2.splat (f64.const 6.93147180369123816490e-01)))))
    (local.set $lo (f64x2.mul (local.get $k) (f64x2.splat (f64.const 1.90821492927058770002e-10))))
    (local.set $r (f64x2.sub (local.get $hi) (local.get $lo)))
    (local.set $t (f64x2.mul (local.get $r) (local.get $r)))
    (local.set $c (f64x2.add (f64x2.splat (f64.const -1.65339022054652515390e-06)) (f64x2.mul (local.get $t) (f64x2.splat (f64.const 4.13813679705723846039e-08)))))
    (local.set $c (f64x2.add (f64x2.splat (f64.const 6.61375632143793436117e-05)) (f64x2.mul (local.get $t) (local.get $c))))
    (local.set $c (f64x2.add (f64x2.splat (f64.const -2.77777777770155933842e-03)) (f64x2.mul (local.get $t) (local.get $c))))
    (local.set $c (f64x2.add (f64x2.splat (f64.const 1.66666666666666019037e-01)) (f64x2.mul (local.get $t) (local.get $c))))
    (local.set $c (f64x2.sub (local.get $r) (f64x2.mul (local.get $t) (local.get $c))))
    (local.set $c (f64x2.mul
      (f64x2.sub (f64x2.splat (f64.const 1))
        (f64x2.sub (f64x2.sub (local.get $lo) (f64x2.div (f64x2.mul (local.get $r) (local.get $c)) (f64x2.sub (f64x2.splat (f64.const 2)) (local.get $c)))) (local.get $hi)))
      ;; kd's low bits are k: (k + 1023) << 52 is 2^k (0xbcc8... is 1023 less 1.5 * 2^52's bits)
      (i64x2.shl (i64x2.add (local.get $kd) (i64x2.splat (i64.const 0xbcc80000000003ff))) (i32.const 52))))
    (local.set $c (v128.bitselect (f64x2.splat (f64.const inf)) (local.get $c) (f64x2.gt (local.get $in) (f64x2.splat (f64.const 708)))))
    (v128.andnot (local.get $c) (f64x2.lt (local.get $in) (f64x2.splat (f64.const -708)))))

  ;; log(1 + e) for e in [0, 1], two at a time (log1pUnit in losses.ts): above sqrt(2) - 1,
  ;; log(2) + log(1 + (e - 1) / 2); log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))), s = f / (2 + f).
  (func $log1p2 (param $e v128) (result v128)
    (local $big v128) (local $f v128) (local $k v128) (local $s v128) (local $z v128) (local $w v128) (local $t1 v128) (local $t2 v128) (local $h v128)
    (local.set $big (f64x2.gt (local.get $e) (f64x2.splat (f64.const 0.41421356237309503))))
    (local.set $f (v128.bitselect (f64x2.mul (f64x2.sub (local.get $e) (f64x2.splat (f64.const 1))) (f64x2.splat (f64.const 0.5))) (local.get $e) (local.get $big)))
    (local.set $k (v128.and (f64x2.splat (f64.const 1)) (local.get $big)))
    (local.set $s (f64x2.div (local.get $f) (f64x2.add (f64x2.splat (f64.const 2)) (local.get $f))))
    (local.set $z (f64x2.mul (local.get $s) (local.get $s)))
    (local.set $w (f64x2.mul (local.get $z) (local.get $z)))
    (local.set $t1 (f64x2.add (f64x2.splat (f64.const 2.222219843214978396e-01)) (f64x2.mul (local.get $w) (f64x2.splat (f64.const 1.531383769920937332e-01)))))
    (local.set $t1 (f64x2.mul (local.get $w) (f64x2.add (f64x2.splat (f64.const 3.999999999940941908e-01)) (f64x2.mul (local.get $w) (local.get $t1)))))
    (local.set $t2 (f64x2.add (f64x2.splat (f64.const 1.818357216161805012e-01)) (f64x2.mul (local.get $w) (f64x2.splat (f64.const 1.479819860511658591e-01)))))
    (local.set $t2 (f64x2.add (f64x2.splat (f64.const 2.857142874366239149e-01)) (f64x2.mul (local.get $w) (local.get $t2))))
    (local.set $t2 (f64x2.mul (local.get $z) (f64x2.add (f64x2.splat (f64.const 6.666666666666735130e-01)) (f64x2.mul (local.get $w) (local.get $t2)))))
    (local.set $h (f64x2.mul (f64x2.mul (f64x2.splat (f64.const 0.5)) (local.get $f)) (local.get $f)))
    (f64x2.sub (f64x2.mul (local.get $k) (f64x2.splat (f64.const 6.93147180369123816490e-01)))
      (f64x2.sub
        (f64x2.sub (local.get $h) (f64x2.add (f64x2.mul (local.get $s) (f64x2.add (local.get $h) (f64x2.add (local.get $t2) (local.get $t1))))
          (f64x2.mul (local.get $k) (f64x2.splat (f64.const 1.90821492927058770002e-10)))))
        (local.get $f))))

  ;; out[i] = log(1 + e^(-m)) - c y[i] sum[i], m = y[i] sum[i], over [from, to) (the logistic
  ;; loss, flip-corrected for c > 0; logistic.value in losses.ts)
  (func (export "logisticLoss") (param $from i32) (param $to i32) (param $y i32) (param $sum i32) (param $c f64) (param $out i32)
    (local $i i32) (local $at i32) (local $yv v128) (local $sv v128) (local $m v128) (local $l v128) (local $pos v128)
    (local.set $i (local.get $from))
    (block $done
      (loop $pair
        (br_if $done (i32.ge_s (local.get $i) (local.get $to)))
        (local.set $at (i32.shl (local.get $i) (i32.const 3)))
        (if (i32.lt_s (i32.add (local.get $i) (i32.const 1)) (local.get $to))
          (then
            (local.set $yv (v128.load (i32.add (local.get $y) (local.get $at))))
            (local.set $sv (v128.load (i32.add (local.get $sum) (local.get $at)))))
          (else
            (local.set $yv (f64x2.splat (f64.load (i32.add (local.get $y) (local.get $at)))))
            (local.set $sv (f64x2.splat (f64.load (i32.add (local.get $sum) (local.get $at)))))))
        (local.set $m (f64x2.mul (local.get $yv) (local.get $sv)))
        (local.set $pos (f64x2.gt (local.get $m) (f64x2.splat (f64.const 0))))
        (local.set $l (call $log1p2 (call $exp2 (v128.bitselect (f64x2.neg (local.get $m)) (local.get $m) (local.get $pos)))))
        (local.set $l (v128.bitselect (local.get $l) (f64x2.sub (local.get $l) (local.get $m)) (local.get $pos)))
        (local.set $l (f64x2.sub (local.get $l) (f64x2.mul (f64x2.mul (f64x2.splat (local.get $c)) (local.get $yv)) (local.get $sv))))
        (if (i32.lt_s (i32.add (local.get $i) (i32.const 1)) (local.get $to))
          (then (v128.store (i32.add (local.get $out) (local.get $at)) (local.get $l)))
          (else (f64.store (i32.add (local.get $out) (local.get $at)) (f64x2.extract_lane 0 (local.get $l)))))
        (local.set $i (i32.add (local.get $i) (i32.const 2)))
        (br $pair))))

  ;; Each lane's constant of its sample's class: pos where y > 0, else neg.
  (func $perClass (param $y v128) (param $neg f64) (param $pos f64) (result v128)
    (v128.bitselect (f64x2.splat (local.get $pos)) (f64x2.splat (local.get $neg)) (f64x2.gt (local.get $y) (f64x2.splat (f64.const 0)))))

  ;; The logistic prox over [from, to) (logisticProxInto in losses.ts, the same operations on
  ;; each sample): with s = y t, b = y a + shift, Newton on h(s) = s - b - R sigma(-s) from the
  ;; warm start; a lane that has stopped keeps its values while the others go on. Four samples
  ;; at a time (two pairs whose Newton steps interleave), then the last one to three two at a
  ;; time. Returns the Newton steps (exponentials) of the samples, as logisticProxInto does.
  ;; R, shift and errScale are the class -1's constants, Rp, shiftP and errP the class +1's
  ;; (class weights scale R; unweighted, the two are equal and each lane gets the same bits).
  (func (export "logisticProx") (param $from i32) (param $to i32) (param $t i32) (param $slope i32) (param $curv i32) (param $y i32) (param $a i32)
    (param $R f64) (param $shift f64) (param $errScale f64) (param $Rp f64) (param $shiftP f64) (param $errP f64) (result i32)
    (local $i i32) (local $at i32) (local $it i32) (local $two i32) (local $steps i64) (local $lanes v128)
    (local $yv v128) (local $b v128) (local $neg v128) (local $s v128) (local $p v128) (local $inv v128) (local $done v128)
    (local $pn v128) (local $invn v128) (local $step v128) (local $sn v128) (local $out v128) (local $conv v128) (local $Rv v128)
    (local $yA v128) (local $yB v128) (local $bA v128) (local $bB v128) (local $negA v128) (local $negB v128) (local $sA v128) (local $sB v128) (local $pA v128) (local $pB v128) (local $invA v128) (local $invB v128) (local $doneA v128) (local $doneB v128) (local $lanesA v128) (local $lanesB v128) (local $pnA v128) (local $pnB v128) (local $invnA v128) (local $invnB v128) (local $stepA v128) (local $stepB v128) (local $snA v128) (local $snB v128) (local $outA v128) (local $outB v128) (local $convA v128) (local $convB v128)
    (local $RvA v128) (local $RvB v128) (local $shA v128) (local $shB v128) (local $errA v128) (local $errB v128) (local $sh v128) (local $err v128)
    (local.set $i (local.get $from))
    ;; Two pairs at a time (four samples): each pair's Newton steps are the ones it takes alone,
    ;; but the two chains of dependent operations interleave (one pair's waits on the divider
    ;; and the exponential are the other's work).
    (block $quadsDone
      (loop $quad
        (br_if $quadsDone (i32.gt_s (i32.add (local.get $i) (i32.const 4)) (local.get $to)))
        (local.set $at (i32.shl (local.get $i) (i32.const 3)))
        (local.set $yA (v128.load (i32.add (local.get $y) (local.get $at))))
        (local.set $RvA (call $perClass (local.get $yA) (local.get $R) (local.get $Rp)))
        (local.set $shA (call $perClass (local.get $yA) (local.get $shift) (local.get $shiftP)))
        (local.set $errA (call $perClass (local.get $yA) (local.get $errScale) (local.get $errP)))
        (local.set $bA (f64x2.add (f64x2.mul (local.get $yA) (v128.load (i32.add (local.get $a) (local.get $at)))) (local.get $shA)))
        (local.set $negA (f64x2.gt (f64x2.sub (f64x2.neg (local.get $bA)) (f64x2.mul (local.get $RvA) (f64x2.splat (f64.const 0.5)))) (f64x2.splat (f64.const 0))))
        (local.set $sA (f64x2.mul (local.get $yA) (v128.load (i32.add (local.get $t) (local.get $at)))))
        (local.set $sA (v128.andnot (local.get $sA)
          (v128.bitselect (f64x2.gt (local.get $sA) (f64x2.splat (f64.const 0))) (f64x2.lt (local.get $sA) (f64x2.splat (f64.const 0))) (local.get $negA))))
        (local.set $invA (f64x2.splat (f64.const 1)))
        (local.set $pA (f64x2.splat (f64.const 0)))
        (local.set $doneA (v128.const i64x2 0 0))
        (local.set $lanesA (v128.const i64x2 0 0))
        (local.set $yB (v128.load (i32.add (local.get $y) (i32.add (local.get $at) (i32.const 16)))))
        (local.set $RvB (call $perClass (local.get $yB) (local.get $R) (local.get $Rp)))
        (local.set $shB (call $perClass (local.get $yB) (local.get $shift) (local.get $shiftP)))
        (local.set $errB (call $perClass (local.get $yB) (local.get $errScale) (local.get $errP)))
        (local.set $bB (f64x2.add (f64x2.mul (local.get $yB) (v128.load (i32.add (local.get $a) (i32.add (local.get $at) (i32.const 16))))) (local.get $shB)))
        (local.set $negB (f64x2.gt (f64x2.sub (f64x2.neg (local.get $bB)) (f64x2.mul (local.get $RvB) (f64x2.splat (f64.const 0.5)))) (f64x2.splat (f64.const 0))))
        (local.set $sB (f64x2.mul (local.get $yB) (v128.load (i32.add (local.get $t) (i32.add (local.get $at) (i32.const 16))))))
        (local.set $sB (v128.andnot (local.get $sB)
          (v128.bitselect (f64x2.gt (local.get $sB) (f64x2.splat (f64.const 0))) (f64x2.lt (local.get $sB) (f64x2.splat (f64.const 0))) (local.get $negB))))
        (local.set $invB (f64x2.splat (f64.const 1)))
        (local.set $pB (f64x2.splat (f64.const 0)))
        (local.set $doneB (v128.const i64x2 0 0))
        (local.set $lanesB (v128.const i64x2 0 0))
        (local.set $it (i32.const 0))
        (block $solvedQ
          (loop $newtonQ
            (br_if $solvedQ (i32.ge_s (local.get $it) (i32.const 100)))
            (local.set $pnA (f64x2.div (f64x2.splat (f64.const 1)) (f64x2.add (f64x2.splat (f64.const 1)) (call $exp2 (local.get $sA)))))
            (local.set $pnB (f64x2.div (f64x2.splat (f64.const 1)) (f64x2.add (f64x2.splat (f64.const 1)) (call $exp2 (local.get $sB)))))
            (local.set $invnA (f64x2.div (f64x2.splat (f64.const 1))
              (f64x2.add (f64x2.splat (f64.const 1)) (f64x2.mul (f64x2.mul (local.get $RvA) (local.get $pnA)) (f64x2.sub (f64x2.splat (f64.const 1)) (local.get $pnA))))))
            (local.set $invnB (f64x2.div (f64x2.splat (f64.const 1))
              (f64x2.add (f64x2.splat (f64.const 1)) (f64x2.mul (f64x2.mul (local.get $RvB) (local.get $pnB)) (f64x2.sub (f64x2.splat (f64.const 1)) (local.get $pnB))))))
            (local.set $stepA (f64x2.mul (f64x2.sub (f64x2.sub (local.get $sA) (local.get $bA)) (f64x2.mul (local.get $RvA) (local.get $pnA))) (local.get $invnA)))
            (local.set $stepB (f64x2.mul (f64x2.sub (f64x2.sub (local.get $sB) (local.get $bB)) (f64x2.mul (local.get $RvB) (local.get $pnB))) (local.get $invnB)))
            (local.set $snA (f64x2.sub (local.get $sA) (local.get $stepA)))
            (local.set $snB (f64x2.sub (local.get $sB) (local.get $stepB)))
            (local.set $outA (v128.bitselect (f64x2.gt (local.get $snA) (f64x2.splat (f64.const 0))) (f64x2.lt (local.get $snA) (f64x2.splat (f64.const 0))) (local.get $negA)))
            (local.set $outB (v128.bitselect (f64x2.gt (local.get $snB) (f64x2.splat (f64.const 0))) (f64x2.lt (local.get $snB) (f64x2.splat (f64.const 0))) (local.get $negB)))
            (local.set $convA (v128.andnot
              (f64x2.le (f64x2.mul (f64x2.mul (local.get $errA) (local.get $stepA)) (local.get $stepA))
                (f64x2.mul (f64x2.splat (f64.const 2.220446049250313e-16)) (f64x2.max (f64x2.abs (local.get $snA)) (f64x2.splat (f64.const 1)))))
              (local.get $outA)))
            (local.set $convB (v128.andnot
              (f64x2.le (f64x2.mul (f64x2.mul (local.get $errB) (local.get $stepB)) (local.get $stepB))
                (f64x2.mul (f64x2.splat (f64.const 2.220446049250313e-16)) (f64x2.max (f64x2.abs (local.get $snB)) (f64x2.splat (f64.const 1)))))
              (local.get $outB)))
            (local.set $snA (v128.andnot (local.get $snA) (local.get $outA)))
            (local.set $snB (v128.andnot (local.get $snB) (local.get $outB)))
            (local.set $sA (v128.bitselect (local.get $sA) (local.get $snA) (local.get $doneA)))
            (local.set $sB (v128.bitselect (local.get $sB) (local.get $snB) (local.get $doneB)))
            (local.set $pA (v128.bitselect (local.get $pA) (local.get $pnA) (local.get $doneA)))
            (local.set $pB (v128.bitselect (local.get $pB) (local.get $pnB) (local.get $doneB)))
            (local.set $invA (v128.bitselect (local.get $invA) (local.get $invnA) (local.get $doneA)))
            (local.set $invB (v128.bitselect (local.get $invB) (local.get $invnB) (local.get $doneB)))
            (local.set $lanesA (i64x2.sub (local.get $lanesA) (v128.not (local.get $doneA))))
            (local.set $lanesB (i64x2.sub (local.get $lanesB) (v128.not (local.get $doneB))))
            (local.set $doneA (v128.or (local.get $doneA) (local.get $convA)))
            (local.set $doneB (v128.or (local.get $doneB) (local.get $convB)))
            (local.set $it (i32.add (local.get $it) (i32.const 1)))
            (br_if $newtonQ (i32.eqz (i32.and (i64x2.all_true (local.get $doneA)) (i64x2.all_true (local.get $doneB)))))))
        (local.set $pnA (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (local.get $yA) (local.get $RvA)) (local.get $pA))
          (f64x2.sub (f64x2.splat (f64.const 1)) (local.get $pA))) (f64x2.sub (f64x2.splat (f64.const 1)) (f64x2.mul (f64x2.splat (f64.const 2)) (local.get $pA))))
          (local.get $invA)) (local.get $invA)) (local.get $invA)))
        (local.set $steps (i64.add (local.get $steps) (i64.add (i64x2.extract_lane 0 (local.get $lanesA)) (i64x2.extract_lane 1 (local.get $lanesA)))))
        (v128.store (i32.add (local.get $t) (local.get $at)) (f64x2.mul (local.get $yA) (local.get $sA)))
        (v128.store (i32.add (local.get $slope) (local.get $at)) (local.get $invA))
        (v128.store (i32.add (local.get $curv) (local.get $at)) (local.get $pnA))
        (local.set $pnB (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (local.get $yB) (local.get $RvB)) (local.get $pB))
          (f64x2.sub (f64x2.splat (f64.const 1)) (local.get $pB))) (f64x2.sub (f64x2.splat (f64.const 1)) (f64x2.mul (f64x2.splat (f64.const 2)) (local.get $pB))))
          (local.get $invB)) (local.get $invB)) (local.get $invB)))
        (local.set $steps (i64.add (local.get $steps) (i64.add (i64x2.extract_lane 0 (local.get $lanesB)) (i64x2.extract_lane 1 (local.get $lanesB)))))
        (v128.store (i32.add (local.get $t) (i32.add (local.get $at) (i32.const 16))) (f64x2.mul (local.get $yB) (local.get $sB)))
        (v128.store (i32.add (local.get $slope) (i32.add (local.get $at) (i32.const 16))) (local.get $invB))
        (v128.store (i32.add (local.get $curv) (i32.add (local.get $at) (i32.const 16))) (local.get $pnB))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $quad)))
    (block $end
      (loop $pair
        (br_if $end (i32.ge_s (local.get $i) (local.get $to)))
        (local.set $at (i32.shl (local.get $i) (i32.const 3)))
        (local.set $two (i32.lt_s (i32.add (local.get $i) (i32.const 1)) (local.get $to)))
        (if (local.get $two)
          (then
            (local.set $yv (v128.load (i32.add (local.get $y) (local.get $at))))
            (local.set $b (v128.load (i32.add (local.get $a) (local.get $at))))
            (local.set $s (v128.load (i32.add (local.get $t) (local.get $at)))))
          (else
            (local.set $yv (f64x2.splat (f64.load (i32.add (local.get $y) (local.get $at)))))
            (local.set $b (f64x2.splat (f64.load (i32.add (local.get $a) (local.get $at)))))
            (local.set $s (f64x2.splat (f64.load (i32.add (local.get $t) (local.get $at)))))))
        (local.set $Rv (call $perClass (local.get $yv) (local.get $R) (local.get $Rp)))
        (local.set $sh (call $perClass (local.get $yv) (local.get $shift) (local.get $shiftP)))
        (local.set $err (call $perClass (local.get $yv) (local.get $errScale) (local.get $errP)))
        (local.set $b (f64x2.add (f64x2.mul (local.get $yv) (local.get $b)) (local.get $sh)))
        ;; the root is negative where h(0) > 0: -b - R/2 > 0
        (local.set $neg (f64x2.gt (f64x2.sub (f64x2.neg (local.get $b)) (f64x2.mul (local.get $Rv) (f64x2.splat (f64.const 0.5)))) (f64x2.splat (f64.const 0))))
        (local.set $s (f64x2.mul (local.get $yv) (local.get $s)))
        ;; a start outside the root's half-line restarts at 0
        (local.set $s (v128.andnot (local.get $s)
          (v128.bitselect (f64x2.gt (local.get $s) (f64x2.splat (f64.const 0))) (f64x2.lt (local.get $s) (f64x2.splat (f64.const 0))) (local.get $neg))))
        (local.set $inv (f64x2.splat (f64.const 1)))
        (local.set $p (f64x2.splat (f64.const 0)))
        (local.set $done (v128.const i64x2 0 0))
        (local.set $lanes (v128.const i64x2 0 0))
        (local.set $it (i32.const 0))
        (block $solved
          (loop $newton
            (br_if $solved (i32.ge_s (local.get $it) (i32.const 100)))
            (local.set $pn (f64x2.div (f64x2.splat (f64.const 1)) (f64x2.add (f64x2.splat (f64.const 1)) (call $exp2 (local.get $s)))))
            (local.set $invn (f64x2.div (f64x2.splat (f64.const 1))
              (f64x2.add (f64x2.splat (f64.const 1)) (f64x2.mul (f64x2.mul (local.get $Rv) (local.get $pn)) (f64x2.sub (f64x2.splat (f64.const 1)) (local.get $pn))))))
            (local.set $step (f64x2.mul (f64x2.sub (f64x2.sub (local.get $s) (local.get $b)) (f64x2.mul (local.get $Rv) (local.get $pn))) (local.get $invn)))
            (local.set $sn (f64x2.sub (local.get $s) (local.get $step)))
            (local.set $out (v128.bitselect (f64x2.gt (local.get $sn) (f64x2.splat (f64.const 0))) (f64x2.lt (local.get $sn) (f64x2.splat (f64.const 0))) (local.get $neg)))
            (local.set $conv (v128.andnot
              (f64x2.le (f64x2.mul (f64x2.mul (local.get $err) (local.get $step)) (local.get $step))
                (f64x2.mul (f64x2.splat (f64.const 2.220446049250313e-16)) (f64x2.max (f64x2.abs (local.get $sn)) (f64x2.splat (f64.const 1)))))
              (local.get $out)))
            (local.set $sn (v128.andnot (local.get $sn) (local.get $out)))
            (local.set $s (v128.bitselect (local.get $s) (local.get $sn) (local.get $done)))
            (local.set $p (v128.bitselect (local.get $p) (local.get $pn) (local.get $done)))
            (local.set $inv (v128.bitselect (local.get $inv) (local.get $invn) (local.get $done)))
            ;; a step in each lane not done before it (all ones is -1)
            (local.set $lanes (i64x2.sub (local.get $lanes) (v128.not (local.get $done))))
            (local.set $done (v128.or (local.get $done) (local.get $conv)))
            (local.set $it (i32.add (local.get $it) (i32.const 1)))
            (br_if $newton (i32.eqz (i64x2.all_true (local.get $done))))))
        ;; t = y s, slope = 1/h', curvature = y R p (1-p) (1-2p) / h'^3
        (local.set $sn (f64x2.mul (local.get $yv) (local.get $s)))
        (local.set $pn (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (f64x2.mul (local.get $yv) (local.get $Rv)) (local.get $p))
          (f64x2.sub (f64x2.splat (f64.const 1)) (local.get $p))) (f64x2.sub (f64x2.splat (f64.const 1)) (f64x2.mul (f64x2.splat (f64.const 2)) (local.get $p))))
          (local.get $inv)) (local.get $inv)) (local.get $inv)))
        (local.set $steps (i64.add (local.get $steps) (i64x2.extract_lane 0 (local.get $lanes))))
        (if (local.get $two)
          (then
            (local.set $steps (i64.add (local.get $steps) (i64x2.extract_lane 1 (local.get $lanes))))
            (v128.store (i32.add (local.get $t) (local.get $at)) (local.get $sn))
            (v128.store (i32.add (local.get $slope) (local.get $at)) (local.get $inv))
            (v128.store (i32.add (local.get $curv) (local.get $at)) (local.get $pn)))
          (else
            (f64.store (i32.add (local.get $t) (local.get $at)) (f64x2.extract_lane 0 (local.get $sn)))
            (f64.store (i32.add (local.get $slope) (local.get $at)) (f64x2.extract_lane 0 (local.get $inv)))
            (f64.store (i32.add (local.get $curv) (local.get $at)) (f64x2.extract_lane 0 (local.get $pn)))))
        (local.set $i (i32.add (local.get $i) (i32.const 2)))
        (br $pair)))
    (i32.wrap_i64 (local.get $steps)))
  ;; The coordinator step's passes for the exact sharing form, over samples [from, to)
  ;; (stepRange in the coordinator's admm-kernels.ts does the same operations in the same
  ;; order, and adds its sums sample by sample as these do). One sample at a time: the passes
  ;; are short, and the sums must keep the twin's order.

  ;; Pass 0, the first party: gap = z - sum invM (the last step's zbar - mean), then sum = s.
  (func (export "stepFirst") (param $from i32) (param $to i32) (param $s i32) (param $sum i32) (param $gap i32) (param $z i32) (param $invM f64)
    (local $at i32) (local $end i32)
    (local.set $at (i32.shl (local.get $from) (i32.const 3)))
    (local.set $end (i32.shl (local.get $to) (i32.const 3)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_s (local.get $at) (local.get $end)))
        (f64.store (i32.add (local.get $gap) (local.get $at))
          (f64.sub (f64.load (i32.add (local.get $z) (local.get $at))) (f64.mul (f64.load (i32.add (local.get $sum) (local.get $at))) (local.get $invM))))
        (f64.store (i32.add (local.get $sum) (local.get $at)) (f64.load (i32.add (local.get $s) (local.get $at))))
        (local.set $at (i32.add (local.get $at) (i32.const 8)))
        (br $next))))

  ;; Pass 0, every other party: sum += s.
  (func (export "stepAdd") (param $from i32) (param $to i32) (param $s i32) (param $sum i32)
    (local $at i32) (local $end i32) (local $p i32)
    (local.set $at (i32.shl (local.get $from) (i32.const 3)))
    (local.set $end (i32.shl (local.get $to) (i32.const 3)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_s (local.get $at) (local.get $end)))
        (local.set $p (i32.add (local.get $sum) (local.get $at)))
        (f64.store (local.get $p) (f64.add (f64.load (local.get $p)) (f64.load (i32.add (local.get $s) (local.get $at)))))
        (local.set $at (i32.add (local.get $at) (i32.const 8)))
        (br $next))))

  ;; Pass 1, the prox points: a' = M ((dual + alpha S invM) + beta z) with beta = 1 - alpha;
  ;; t += da (slope + (0.5 da) curvature) with da = a' - a; a = a'.
  (func (export "stepPoints")
    (param $from i32) (param $to i32) (param $sum i32) (param $dual i32) (param $z i32) (param $a i32) (param $t i32) (param $slope i32) (param $curv i32)
    (param $M f64) (param $alpha f64) (param $beta f64) (param $invM f64)
    (local $at i32) (local $end i32) (local $ai f64) (local $da f64) (local $pa i32) (local $pt i32)
    (local.set $at (i32.shl (local.get $from) (i32.const 3)))
    (local.set $end (i32.shl (local.get $to) (i32.const 3)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_s (local.get $at) (local.get $end)))
        (local.set $ai (f64.mul (local.get $M)
          (f64.add
            (f64.add (f64.load (i32.add (local.get $dual) (local.get $at)))
              (f64.mul (f64.mul (local.get $alpha) (f64.load (i32.add (local.get $sum) (local.get $at)))) (local.get $invM)))
            (f64.mul (local.get $beta) (f64.load (i32.add (local.get $z) (local.get $at)))))))
        (local.set $pa (i32.add (local.get $a) (local.get $at)))
        (local.set $pt (i32.add (local.get $t) (local.get $at)))
        (local.set $da (f64.sub (local.get $ai) (f64.load (local.get $pa))))
        (f64.store (local.get $pt)
          (f64.add (f64.load (local.get $pt))
            (f64.mul (local.get $da)
              (f64.add (f64.load (i32.add (local.get $slope) (local.get $at)))
                (f64.mul (f64.mul (f64.const 0.5) (local.get $da)) (f64.load (i32.add (local.get $curv) (local.get $at))))))))
        (f64.store (local.get $pa) (local.get $ai))
        (local.set $at (i32.add (local.get $at) (i32.const 8)))
        (br $next))))

  ;; Pass 2: z = t invM, u = a invM - z, c = (mean - z) + u with mean = S invM, offset =
  ;; z - mean, gap = (z - mean) - gap; with $pack, F(v)'s zbar and u at $pz and $pu. Sums
  ;; (mean - z)^2 to out[0] and u^2 to out[4] (PRIMAL_SQ, NORM_DUAL).
  (func (export "stepUpdate")
    (param $from i32) (param $to i32) (param $sum i32) (param $t i32) (param $a i32) (param $z i32) (param $dual i32) (param $c i32) (param $offset i32) (param $gap i32)
    (param $pz i32) (param $pu i32) (param $pack i32) (param $invM f64) (param $out i32)
    (local $at i32) (local $end i32) (local $zi f64) (local $ui f64) (local $mean f64) (local $d f64) (local $primal f64) (local $norm f64) (local $pg i32)
    (local.set $at (i32.shl (local.get $from) (i32.const 3)))
    (local.set $end (i32.shl (local.get $to) (i32.const 3)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_s (local.get $at) (local.get $end)))
        (local.set $zi (f64.mul (f64.load (i32.add (local.get $t) (local.get $at))) (local.get $invM)))
        (f64.store (i32.add (local.get $z) (local.get $at)) (local.get $zi))
        (local.set $ui (f64.sub (f64.mul (f64.load (i32.add (local.get $a) (local.get $at))) (local.get $invM)) (local.get $zi)))
        (f64.store (i32.add (local.get $dual) (local.get $at)) (local.get $ui))
        (local.set $mean (f64.mul (f64.load (i32.add (local.get $sum) (local.get $at))) (local.get $invM)))
        (local.set $d (f64.sub (local.get $mean) (local.get $zi)))
        (f64.store (i32.add (local.get $c) (local.get $at)) (f64.add (local.get $d) (local.get $ui)))
        (local.set $primal (f64.add (local.get $primal) (f64.mul (local.get $d) (local.get $d))))
        (local.set $norm (f64.add (local.get $norm) (f64.mul (local.get $ui) (local.get $ui))))
        (local.set $d (f64.sub (local.get $zi) (local.get $mean)))
        (f64.store (i32.add (local.get $offset) (local.get $at)) (local.get $d))
        (local.set $pg (i32.add (local.get $gap) (local.get $at)))
        (f64.store (local.get $pg) (f64.sub (local.get $d) (f64.load (local.get $pg))))
        (if (local.get $pack)
          (then
            (f64.store (i32.add (local.get $pz) (local.get $at)) (local.get $zi))
            (f64.store (i32.add (local.get $pu) (local.get $at)) (local.get $ui))))
        (local.set $at (i32.add (local.get $at) (i32.const 8)))
        (br $next)))
    (f64.store (local.get $out) (local.get $primal))
    (f64.store offset=32 (local.get $out) (local.get $norm)))

  ;; Pass 3 for one party: dz = (s - old) + gap, z_m = s + offset; adds dz^2, s^2 and z_m^2 to
  ;; out[1], out[2] and out[3] (DUAL_SQ, NORM_S, NORM_Z, party after party); old = s; with
  ;; $pack, w_m = s - c at $w.
  (func (export "stepParty")
    (param $from i32) (param $to i32) (param $s i32) (param $old i32) (param $gap i32) (param $offset i32) (param $c i32) (param $w i32) (param $pack i32) (param $out i32)
    (local $at i32) (local $end i32) (local $si f64) (local $d f64) (local $dual f64) (local $normS f64) (local $normZ f64) (local $po i32)
    (local.set $dual (f64.load offset=8 (local.get $out)))
    (local.set $normS (f64.load offset=16 (local.get $out)))
    (local.set $normZ (f64.load offset=24 (local.get $out)))
    (local.set $at (i32.shl (local.get $from) (i32.const 3)))
    (local.set $end (i32.shl (local.get $to) (i32.const 3)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_s (local.get $at) (local.get $end)))
        (local.set $si (f64.load (i32.add (local.get $s) (local.get $at))))
        (local.set $po (i32.add (local.get $old) (local.get $at)))
        (local.set $d (f64.add (f64.sub (local.get $si) (f64.load (local.get $po))) (f64.load (i32.add (local.get $gap) (local.get $at)))))
        (local.set $dual (f64.add (local.get $dual) (f64.mul (local.get $d) (local.get $d))))
        (local.set $normS (f64.add (local.get $normS) (f64.mul (local.get $si) (local.get $si))))
        (local.set $d (f64.add (local.get $si) (f64.load (i32.add (local.get $offset) (local.get $at)))))
        (local.set $normZ (f64.add (local.get $normZ) (f64.mul (local.get $d) (local.get $d))))
        (f64.store (local.get $po) (local.get $si))
        (if (local.get $pack)
          (then (f64.store (i32.add (local.get $w) (local.get $at)) (f64.sub (local.get $si) (f64.load (i32.add (local.get $c) (local.get $at)))))))
        (local.set $at (i32.add (local.get $at) (i32.const 8)))
        (br $next)))
    (f64.store offset=8 (local.get $out) (local.get $dual))
    (f64.store offset=16 (local.get $out) (local.get $normS))
    (f64.store offset=24 (local.get $out) (local.get $normZ)))
)
