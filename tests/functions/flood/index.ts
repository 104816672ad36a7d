// Logs a hundred thousand lines, then answers.
Deno.serve(() => {
  for (let i = 0; i < 100000; i++) console.log(`line ${i} ${"x".repeat(100)}`)
  return new Response("flooded")
})
