Deno.serve(() => {
  throw new Error("something broke")
})
