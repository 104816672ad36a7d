// Logs twenty thousand lines, then answers.
Deno.serve(() => {
  for (let i = 0; i < 20000; i++) console.log(`line ${i} ${"x".repeat(100)}`)
  return new Response("flooded")
})
