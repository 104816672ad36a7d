// Answers in chunks, a tenth of a second apart.
Deno.serve(() => {
  let n = 0
  const body = new ReadableStream({
    async pull(controller) {
      await new Promise((r) => setTimeout(r, 100))
      n += 1
      controller.enqueue(new TextEncoder().encode(`chunk ${n}\n`))
      if (n === 5) controller.close()
    },
  })
  return new Response(body, { headers: { "Content-Type": "text/plain" } })
})
