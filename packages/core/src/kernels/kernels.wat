;; Per-round products over data held in this module's memory (see wasm-kernels.ts): a CSR
;; matrix's, and a panel of single-precision columns'. Every function does exactly the
;; operations of its TypeScript twin, in the same order, so the results are the same to the
;; bit: IEEE double multiply then add, never fused (a single is widened to a double exactly).
;; Arguments are byte offsets into memory: indptr and indices (i32), values (f64), panels
;; (f32), vectors (f64). The encoded module is in wasm-kernels-bytes.ts (npm run wasm).
;; The memory is shared (a SharedArrayBuffer), so the x-update's threads (DenseThreads) form a
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
        (br $rows)))))
