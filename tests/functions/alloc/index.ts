// Keeps every array it makes.
const kept: number[][] = []
Deno.serve(() => {
  while (true) kept.push(new Array(1 << 20).fill(1))
})
