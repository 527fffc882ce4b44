/** A small typed event emitter (no dependency on Node's `events` so it runs in browsers). */

export type Listener<T> = (event: T) => void;

export class Emitter<Events extends { [K in keyof Events]: unknown }> {
  private readonly listeners = new Map<keyof Events, Set<Listener<never>>>();

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof Events>(name: K, listener: Listener<Events[K]>): () => void {
    let set = this.listeners.get(name);
    if (!set) {
      set = new Set();
      this.listeners.set(name, set);
    }
    set.add(listener as Listener<never>);
    return () => this.off(name, listener);
  }

  off<K extends keyof Events>(name: K, listener: Listener<Events[K]>): void {
    this.listeners.get(name)?.delete(listener as Listener<never>);
  }

  /** Calls every listener; a listener that throws does not stop the others. */
  protected emit<K extends keyof Events>(name: K, event: Events[K]): void {
    for (const listener of [...(this.listeners.get(name) ?? [])]) {
      try {
        (listener as Listener<Events[K]>)(event);
      } catch (e) {
        setTimeout(() => {
          throw e;
        });
      }
    }
  }

  protected listenerCount(name: keyof Events): number {
    return this.listeners.get(name)?.size ?? 0;
  }
}
