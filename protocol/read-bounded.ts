import fs from 'node:fs';

/**
 * A text file read whole, up to `max` bytes: past it, an Error saying so. readFileSync of a device
 * (`/dev/zero`) or a huge file given by mistake grew until the process died (std::bad_alloc).
 */
export function readBounded(file: string, max: number): string {
  const fd = fs.openSync(file, 'r');
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    const buf = Buffer.alloc(Math.min(max + 1, 1024 * 1024));
    for (let n = fs.readSync(fd, buf, 0, buf.length, null); n > 0; n = fs.readSync(fd, buf, 0, buf.length, null)) {
      total += n;
      if (total > max) throw new Error(`larger than ${max >= 1048576 ? `${max / 1048576} MiB` : `${max} bytes`}; is it the file meant?`);
      chunks.push(Buffer.from(buf.subarray(0, n)));
    }
    return Buffer.concat(chunks).toString('utf8');
  } finally { fs.closeSync(fd); }
}
