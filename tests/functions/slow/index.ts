// Waits half a minute before answering, using no CPU meanwhile.
Deno.serve(async () => {
  await new Promise((r) => setTimeout(r, 30000))
  return new Response("late")
})
