// The environment a function is given.
export default {
  fetch(_req: Request) {
    const env = Deno.env.toObject()
    return Response.json({
      names: Object.keys(env).sort(),
      url: env.SUPABASE_URL,
      anon: env.SUPABASE_ANON_KEY,
      service: env.SUPABASE_SERVICE_ROLE_KEY,
      secret: env.MY_SECRET ?? null,
    })
  },
}
