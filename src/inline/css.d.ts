/** CSS files imported as text by the inline bundle (esbuild's `text` loader). */
declare module '*.css' {
  const text: string;
  export default text;
}
