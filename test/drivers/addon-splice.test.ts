import t from 'tap';
import { findOnce, splice } from '../../drivers/llama-build/addon-splice.js';

const src = 'int a;\n    int anchor;\nint b;\n';
const anchor = '    int anchor;\n';

t.test('splice puts the text before the anchor, after it, or in its place', async (t) => {
  t.equal(splice(src, anchor, 'X\n', 'before', 'f.cpp'), 'int a;\nX\n    int anchor;\nint b;\n');
  t.equal(splice(src, anchor, 'X\n', 'after', 'f.cpp'), 'int a;\n    int anchor;\nX\nint b;\n');
  t.equal(splice(src, anchor, 'X\n', 'replace', 'f.cpp'), 'int a;\nX\nint b;\n');
  // At the edges of the source too.
  t.equal(splice('A', 'A', 'x', 'before', 'f'), 'xA');
  t.equal(splice('A', 'A', 'x', 'after', 'f'), 'Ax');
  t.equal(splice('A', 'A', 'x', 'replace', 'f'), 'x');
  t.equal(findOnce(src, anchor, 'f.cpp'), 7);
});

t.test('an anchor missing or there twice stops the patch, naming the file and the anchor', async (t) => {
  t.throws(() => splice(src, 'int c;', 'X', 'before', 'f.cpp'), /^f\.cpp: "int c;" was not found exactly once: this node-llama-cpp is not the one the patch was written for$/);
  t.throws(() => splice(src + src, anchor, 'X', 'after', 'g.h'), /^g\.h: "int anchor;" was not found exactly once/);
  // A multi-line anchor is named by its first line.
  t.throws(() => findOnce(src, '    int anchor;\nint c;\n', 'f.cpp'), /"int anchor;" was not found/);
});
