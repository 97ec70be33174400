package io.ibdxnet.internal;

import io.ibdxnet.Message;
import io.ibdxnet.MessageHandler;
import io.ibdxnet.transport.NodeRefs;
import java.lang.reflect.Constructor;

/**
 * The registered message types: for each type/subtype the class to create
 * and the handler to give it to. Tables indexed by {@link #key} (paged: a
 * node registers a few types), not maps (a boxed key per message showed in
 * profiles).
 */
public final class MessageTypes {
    private final NodeRefs<Constructor<? extends Message>> constructors = new NodeRefs<>();
    /** Each handler takes the class {@link #constructors} creates for its key. */
    private final NodeRefs<MessageHandler<Message>> handlers = new NodeRefs<>();

    static int key(byte type, byte subtype) {
        return (type & 0xFF) << 8 | (subtype & 0xFF);
    }

    /** Makes {@code type/subtype} create {@code c}; refuses another class for a key already taken. */
    public void define(byte type, byte subtype, Class<? extends Message> c) {
        try {
            Constructor<? extends Message> ctor = c.getDeclaredConstructor();
            ctor.setAccessible(true);
            Constructor<? extends Message> old = constructors.compareAndExchange(key(type, subtype), null, ctor);
            if (old != null && !old.equals(ctor)) {
                throw new IllegalArgumentException("type " + type + "/" + subtype + " is already registered to "
                        + old.getDeclaringClass().getName());
            }
        } catch (NoSuchMethodException e) {
            throw new IllegalArgumentException(c.getName() + " has no no-argument constructor", e);
        }
    }

    public void handleWith(byte type, byte subtype, MessageHandler<Message> handler) {
        handlers.set(key(type, subtype), handler);
    }

    /** The constructor of {@code type/subtype}, or null when it is not registered. */
    Constructor<? extends Message> constructor(byte type, byte subtype) {
        return constructors.get(key(type, subtype));
    }

    /** The handler of {@code type/subtype}, or null. */
    MessageHandler<Message> handler(byte type, byte subtype) {
        return handlers.get(key(type, subtype));
    }

    /** An instance of {@code c} made with its no-argument constructor (to learn its type). */
    public static Message probe(Class<? extends Message> c) {
        try {
            Constructor<? extends Message> ctor = c.getDeclaredConstructor();
            ctor.setAccessible(true);
            return ctor.newInstance();
        } catch (NoSuchMethodException e) {
            throw new IllegalArgumentException(c.getName() + " has no no-argument constructor", e);
        } catch (ReflectiveOperationException e) {
            throw new IllegalArgumentException("cannot create a " + c.getName() + " to learn its type: " + e, e);
        }
    }
}
